package compiler

import (
	"os"
	"strings"
	"testing"
)

func TestConfigForms(t *testing.T) {
	tiny, err := LoadConfig("../testdata/tiny-v4-dev")
	if err != nil {
		t.Fatal(err)
	}
	want := []LayerSpec{{AttnHCA, 8, MLPHashMoE}, {AttnCSA, 4, MLPMoE}, {AttnHCA, 8, MLPMoE}, {AttnCSA, 4, MLPMoE}}
	for i, l := range tiny.Layers {
		if l != want[i] {
			t.Errorf("tiny layer %d: %+v, want %+v", i, l, want[i])
		}
	}
	if tiny.RopeDim != 8 || tiny.CompressYarn != nil {
		t.Errorf("tiny rope dim %d yarn %v", tiny.RopeDim, tiny.CompressYarn)
	}
	flash, err := LoadConfig("../testdata/deepseek-v4-flash")
	if err != nil {
		t.Fatal(err)
	}
	var n [3]int
	hash := 0
	for _, l := range flash.Layers {
		n[l.Attn]++
		if l.MLP == MLPHashMoE {
			hash++
		}
	}
	if len(flash.Layers) != 43 || n != [3]int{2, 21, 20} || hash != 3 || flash.NumMTP != 1 {
		t.Errorf("flash: %d layers, kinds %v, %d hash, %d mtp", len(flash.Layers), n, hash, flash.NumMTP)
	}
	if y := flash.CompressYarn; y == nil || y.Factor != 16 || y.OriginalMax != 65536 || y.BetaFast != 32 {
		t.Errorf("flash yarn %+v", flash.CompressYarn)
	}
	if q := flash.Quant; q == nil || q.Block != [2]int{128, 128} || q.ScaleFmt != "ue8m0" {
		t.Errorf("flash quant %+v", flash.Quant)
	}
}

func TestConfigErrors(t *testing.T) {
	base, err := os.ReadFile("../testdata/tiny-v4-dev/config.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"model_type": "deepseek_v4"`, `"model_type": "llama"`, "model_type"},
		{`"hidden_size": 64`, `"hidden_size": -64`, "hidden_size"},
		{`"hidden_size": 64`, `"hidden_size": "64"`, "hidden_size"},
		{`"num_key_value_heads": 1`, `"num_key_value_heads": 8`, "num_key_value_heads"},
		{`"scoring_func": "sqrtsoftplus"`, `"scoring_func": "relu"`, "scoring_func"},
		{`"o_groups": 2`, `"o_groups": 3`, "o_groups"},
		{`"heavily_compressed_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",`, `"heavily_compressed_attention",`, "layer_types"},
		{`"num_experts_per_tok": 2`, `"num_experts_per_tok": 20`, "num_experts_per_tok"},
		{`{`, `[`, "not a JSON object"},
	} {
		data := strings.Replace(string(base), c.from, c.to, 1)
		if data == string(base) {
			t.Fatalf("substitution %q did not apply", c.from)
		}
		_, err := ParseConfig([]byte(data), "config.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "config.json") {
			t.Errorf("%q: error %v, want one naming config.json and %q", c.to, err, c.want)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, p := range []string{"../testdata/tiny-v4-dev/config.json", "../testdata/deepseek-v4-flash/config.json"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(embeddedConfig))
	f.Add([]byte(`{"model_type":"deepseek_v4","compress_ratios":[0,4,128],"num_hidden_layers":3,"num_hash_layers":5}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, "fuzz.json")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		// a config that validates must lower to a module that verifies
		if len(c.Layers) != c.NumLayers || c.Hidden <= 0 || c.RopeDim%2 != 0 {
			t.Fatalf("accepted inconsistent config: %+v", c)
		}
		if int64(c.NumLayers)*int64(c.NRouted) > 4096 || int64(c.Hidden)*int64(c.VocabSize) > 1<<26 {
			return // too large to lower quickly inside the fuzzer
		}
		if _, err := Lower(c); err != nil {
			t.Fatalf("lowering an accepted config: %v", err)
		}
	})
}
