// Package deploy reads deployment specs: which target, how many devices, how each role
// (prefill, decode) splits attention and experts over them, and the serving limits the
// planner must prove feasible before anything starts.
//
// A spec is YAML or JSON. It is checked in three steps, each error naming the field by
// JSON pointer: the JSON Schema (Schema, printed by `dic schema deploy`), DeepInfer's
// environment variables overriding their fields, then the cross-field rules (devices
// per role against the topology, expert parallelism dividing the role, ...).
package deploy

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Spec is a deployment spec.
type Spec struct {
	Target         string      `json:"target"`
	Topology       Topology    `json:"topology"`
	Roles          Roles       `json:"roles"`
	KVCache        KVCache     `json:"kv_cache"`
	Experts        Experts     `json:"experts"`
	Speculative    Speculative `json:"speculative"`
	SWAReplay      SWAReplay   `json:"swa_replay"`
	BatchInvariant bool        `json:"batch_invariant"`
	// File is where the spec was read from ("" for built ones).
	File string `json:"-"`
}

// Topology is the cluster.
type Topology struct {
	Nodes          int `json:"nodes"`
	DevicesPerNode int `json:"devices_per_node"`
	ScaleUpDomain  int `json:"scale_up_domain"`
}

// Devices is the device count of the cluster.
func (t Topology) Devices() int { return t.Nodes * t.DevicesPerNode }

// Roles holds the prefill and decode roles; either may be absent.
type Roles struct {
	Prefill *Role `json:"prefill,omitempty"`
	Decode  *Role `json:"decode,omitempty"`
}

// Role is how one serving role is laid out: attention data parallel (dp), context
// parallel (cp) and tensor parallel (tp) ranks, the MoE's expert-parallel width (ep),
// and its per-rank limits.
type Role struct {
	DP                  int `json:"dp"`
	EP                  int `json:"ep"`
	CP                  int `json:"cp"`
	TP                  int `json:"tp"`
	MaxNumSeqs          int `json:"max_num_seqs"`
	MaxModelLen         int `json:"max_model_len"`
	MaxNumBatchedTokens int `json:"max_num_batched_tokens"`
}

// Devices is the number of devices the role occupies.
func (r *Role) Devices() int { return r.DP * r.CP * r.TP }

// KVCache configures the KV cache.
type KVCache struct {
	DType          string  `json:"dtype"`
	MemoryFraction float64 `json:"memory_fraction"`
}

// Experts configures expert placement.
type Experts struct {
	NumRedundant int    `json:"num_redundant"`
	Policy       string `json:"policy"`
	Loads        string `json:"loads,omitempty"`
	Synthetic    string `json:"synthetic,omitempty"`
	Groups       int    `json:"groups,omitempty"`
}

// Speculative configures speculative decoding.
type Speculative struct {
	Method               string `json:"method"`
	NumSpeculativeTokens int    `json:"num_speculative_tokens"`
	Varlen               bool   `json:"varlen"`
}

// SWAReplay configures the sliding-window bounded replay (YOCO prefill truncation).
type SWAReplay struct {
	Mode       string `json:"mode"`
	KeepTokens int    `json:"keep_tokens"`
}

// Schema is the spec's JSON Schema (draft 2020-12).
//
//go:embed schema.json
var Schema string

// Error is a spec error at a JSON pointer.
type Error struct {
	File    string
	Pointer string
	Msg     string
}

func (e *Error) Error() string {
	ptr := e.Pointer
	if ptr == "" {
		ptr = "/"
	}
	if e.File == "" {
		return fmt.Sprintf("deploy spec %s: %s", ptr, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, ptr, e.Msg)
}

var compiled = mustCompile()

func mustCompile() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(Schema))
	if err != nil {
		panic("deploy schema: " + err.Error())
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("deploy.schema.json", doc); err != nil {
		panic("deploy schema: " + err.Error())
	}
	s, err := c.Compile("deploy.schema.json")
	if err != nil {
		panic("deploy schema: " + err.Error())
	}
	return s
}

// Load reads a spec file (YAML or JSON), applies the environment overrides and checks it.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path, os.LookupEnv)
}

// maxSpecBytes bounds a spec file.
const maxSpecBytes = 1 << 20

// Parse checks spec bytes; env looks up environment variables (os.LookupEnv, or a map in tests).
func Parse(data []byte, file string, env func(string) (string, bool)) (*Spec, error) {
	name := filepath.Base(file)
	if len(data) > maxSpecBytes {
		return nil, &Error{File: name, Msg: fmt.Sprintf("%d bytes is larger than the %d-byte limit for a spec", len(data), maxSpecBytes)}
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil { // YAML is a superset of JSON
		return nil, &Error{File: name, Msg: "not YAML or JSON: " + oneLine(err.Error())}
	}
	doc, err := jsonCompatible(doc, "")
	if err != nil {
		return nil, &Error{File: name, Msg: err.Error()}
	}
	if err := applyEnv(doc, env); err != nil {
		err.File = name
		return nil, err
	}
	if err := compiled.Validate(doc); err != nil {
		return nil, schemaError(name, err)
	}
	raw, _ := json.Marshal(doc)
	s := defaults()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(s); err != nil {
		return nil, &Error{File: name, Msg: oneLine(err.Error())}
	}
	s.File = file
	if err := s.Check(); err != nil {
		err.File = name
		return nil, err
	}
	return s, nil
}

func defaults() *Spec {
	return &Spec{
		KVCache:     KVCache{DType: "auto", MemoryFraction: 0.9},
		Experts:     Experts{Policy: "default"},
		Speculative: Speculative{Method: "none"},
		SWAReplay:   SWAReplay{Mode: "off", KeepTokens: 140},
	}
}

// jsonCompatible turns YAML's decoded values into JSON's (string keys, float64 numbers).
func jsonCompatible(v any, ptr string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			c, err := jsonCompatible(e, ptr+"/"+k)
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
		return x, nil
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("%s: key %v is not a string", ptr, k)
			}
			c, err := jsonCompatible(e, ptr+"/"+ks)
			if err != nil {
				return nil, err
			}
			m[ks] = c
		}
		return m, nil
	case []any:
		for i, e := range x {
			c, err := jsonCompatible(e, fmt.Sprintf("%s/%d", ptr, i))
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
		return x, nil
	case int:
		return json.Number(strconv.Itoa(x)), nil
	case int64:
		return json.Number(strconv.FormatInt(x, 10)), nil
	case uint64:
		return json.Number(strconv.FormatUint(x, 10)), nil
	case float64:
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64)), nil
	case string, bool, nil:
		return x, nil
	}
	return nil, fmt.Errorf("%s: unsupported value %T", ptr, v)
}

// EnvVars are DeepInfer's environment variables and the spec fields they override.
var EnvVars = []struct{ Name, Pointer, Kind string }{
	{"DEEPINFER_BATCH_INVARIANT", "/batch_invariant", "bool"},
	{"DEEPINFER_USE_NEXTN_DECODE", "/speculative/num_speculative_tokens", "int"},
	{"DEEPINFER_ENABLE_MTP_VARLEN", "/speculative/varlen", "bool"},
	{"DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE", "/swa_replay/mode", "string"},
	{"DEEPINFER_YOCO_PREFILL_KEEP_TOKENS", "/swa_replay/keep_tokens", "int"},
}

func applyEnv(doc any, env func(string) (string, bool)) *Error {
	root, ok := doc.(map[string]any)
	if !ok {
		return nil // the schema reports it
	}
	for _, ev := range EnvVars {
		val, set := env(ev.Name)
		if !set || val == "" {
			continue
		}
		var v any
		switch ev.Kind {
		case "bool":
			switch strings.ToLower(val) {
			case "1", "true", "yes", "on":
				v = true
			case "0", "false", "no", "off":
				v = false
			default:
				return &Error{Pointer: ev.Pointer, Msg: fmt.Sprintf("environment %s=%q is not a boolean (1/0)", ev.Name, val)}
			}
		case "int":
			n, err := strconv.Atoi(val)
			if err != nil {
				return &Error{Pointer: ev.Pointer, Msg: fmt.Sprintf("environment %s=%q is not an integer", ev.Name, val)}
			}
			v = json.Number(strconv.Itoa(n))
		default:
			v = val
		}
		parts := strings.Split(strings.TrimPrefix(ev.Pointer, "/"), "/")
		m := root
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[parts[len(parts)-1]] = v
		if ev.Name == "DEEPINFER_USE_NEXTN_DECODE" {
			if _, has := m["method"]; !has {
				m["method"] = "dspark"
			}
		}
	}
	return nil
}

var printer = message.NewPrinter(language.English)

// schemaError reports the deepest, first-in-document-order schema violation.
func schemaError(file string, err error) error {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return &Error{File: file, Msg: oneLine(err.Error())}
	}
	var leaves []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.SliceStable(leaves, func(i, j int) bool {
		return strings.Join(leaves[i].InstanceLocation, "/") < strings.Join(leaves[j].InstanceLocation, "/")
	})
	leaf := leaves[0]
	ptr := ""
	for _, p := range leaf.InstanceLocation {
		ptr += "/" + p
	}
	return &Error{File: file, Pointer: ptr, Msg: oneLine(leaf.ErrorKind.LocalizedString(printer))}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
