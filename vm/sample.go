package vm

import (
	"fmt"
	"math"
)

// Sampling are a request's sampling parameters. Temperature 0 is greedy. The request's
// random numbers come from a stream seeded by Seed, one per sampled token, so a seeded
// request draws the same tokens whatever else is in the batch.
type Sampling struct {
	Temperature float64
	TopP        float64 // 0 or 1: no nucleus cut
	TopK        int     // 0: no cut
	Seed        uint64
}

// Validate rejects parameters outside their ranges.
func (s Sampling) Validate() error {
	switch {
	case s.Temperature < 0 || math.IsNaN(s.Temperature) || s.Temperature > 100:
		return fmt.Errorf("temperature %g is outside [0, 100]", s.Temperature)
	case s.TopP < 0 || s.TopP > 1 || math.IsNaN(s.TopP):
		return fmt.Errorf("top_p %g is outside [0, 1]", s.TopP)
	case s.TopK < 0:
		return fmt.Errorf("top_k %d is negative", s.TopK)
	}
	return nil
}
