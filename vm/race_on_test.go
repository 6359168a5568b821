//go:build race

package vm_test

// raceOn: the race detector slows the model tests about tenfold, so the heaviest use
// smaller requests under it.
const raceOn = true
