package calib

import (
	"fmt"
	"strings"
	"testing"

	"deepinfer/targets/h200"
)

func TestTmpPins(t *testing.T) {
	cal := Fitted["cuda-fast"]
	m, err := cal.Apply(h200.Model(), "deepseek_v41")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Run20Later {
		data, err := Load("../..", []Measured{r})
		if err != nil {
			t.Fatal(err)
		}
		name := r.File[strings.LastIndex(r.File, "/")+1:]
		res, err := Evaluate(m, group(data, "fast", "deepseek_v41"), nil, Acceptance)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i, p := range res {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "\"%d/%d\": %.4f", p.Batch, p.Context, p.Err())
		}
		fmt.Printf("\t\t%q: {map[string]float64{%s}, %d},\n", name, b.String(), Summarize(res, Acceptance).ClassMisses)
	}
}
