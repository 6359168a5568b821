package kvlayout

import "testing"

func TestLayoutValidate(t *testing.T) {
	bad := []Layout{
		{Layers: []LayerLayout{{Window: 0, Dim: 8}}},
		{Layers: []LayerLayout{{Window: 8, Dim: 8, Caches: []CacheLayout{{Ratio: 0, Dim: 8}}}}},
		{Layers: []LayerLayout{{Window: 8, Dim: 8, Caches: make([]CacheLayout, 3)}}},
	}
	for i, l := range bad {
		if l.Validate() == nil {
			t.Errorf("layout %d accepted", i)
		}
	}
}
