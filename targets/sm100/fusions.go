package sm100

import "deepinfer/targets"

func init() { Target.FusionRules = targets.DeepSeekFusions }
