//go:build race

package grammars

const raceEnabled = true
