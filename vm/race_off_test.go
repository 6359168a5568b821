//go:build !race

package vm_test

const raceOn = false
