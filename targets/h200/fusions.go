package h200

import "deepinfer/targets"

// Hopper builds of DeepSeek's kernels fuse the same chains as on SM100.
func init() { Target.FusionRules = targets.DeepSeekFusions }
