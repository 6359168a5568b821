package grammars

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Loading a schema document into the schema library's Schema type, in linear time.
//
// The library's Compile is exact but slow on large documents: its work queue finds
// a subschema already queued by a linear scan (quadratic in the number of
// subschemas), it looks resources up by a scan too, and it checks the document
// against the draft's metaschema with its general validator, which for a small
// schema is a third of the time to the first mask. loadFast does the same work for a
// self-contained document in one of the five drafts: it checks the document against
// the rules of the draft's metaschema (schema_meta.go), collects the resources ($id)
// and anchors, resolves every reference, and fills each Schema's exported fields as
// the library's compiler does. TestFastLoadMatchesLibrary compares the two, field by
// field, on every schema of the test data.
//
// What it leaves to the library (errUseLibrary): a $schema other than the five
// drafts, a reference outside the document, an embedded resource in another draft,
// $vocabulary, and a registered SchemaLoader's documents. The library then loads the
// schema as before, metaschema validation included. The library's validator needs
// what only its compiler fills (dynamic scopes, the types of enum values): values are
// validated by fastValid on loadFast's graph (schema_validate.go), and a graph that
// needs dynamic scopes (2 of MaskBench's 11,305 schemas) is compiled by
// the library too, at compile time, so that every refusal happens then.

var errUseLibrary = errors.New("left to the schema library")

// draftSpec is what loading needs to know of a draft.
type draftSpec struct {
	version int
	idKey   string    // "id" (draft 4) or "$id"
	subs    []subPath // where subschemas are, for resources and anchors
}

// subPath is a subschema position: kw's value (single), each member of kw's object
// value (members) or each item of kw's array value (items).
type subPath struct {
	kw   string
	kind byte // 's' single, 'm' members, 'a' items
}

var (
	draft4Spec = &draftSpec{version: 4, idKey: "id", subs: []subPath{
		{"definitions", 'm'}, {"not", 's'}, {"allOf", 'a'}, {"anyOf", 'a'}, {"oneOf", 'a'},
		{"properties", 'm'}, {"additionalProperties", 's'}, {"patternProperties", 'm'},
		{"items", 's'}, {"items", 'a'}, {"additionalItems", 's'}, {"dependencies", 'm'}}}
	draft6Spec = &draftSpec{version: 6, idKey: "$id", subs: append(slices.Clone(draft4Spec.subs),
		subPath{"propertyNames", 's'}, subPath{"contains", 's'})}
	draft7Spec = &draftSpec{version: 7, idKey: "$id", subs: append(slices.Clone(draft6Spec.subs),
		subPath{"if", 's'}, subPath{"then", 's'}, subPath{"else", 's'})}
	draft2019Spec = &draftSpec{version: 2019, idKey: "$id", subs: append(slices.Clone(draft7Spec.subs),
		subPath{"$defs", 'm'}, subPath{"dependentSchemas", 'm'}, subPath{"unevaluatedProperties", 's'},
		subPath{"unevaluatedItems", 's'}, subPath{"contentSchema", 's'})}
	draft2020Spec = &draftSpec{version: 2020, idKey: "$id", subs: append(slices.Clone(draft2019Spec.subs),
		subPath{"prefixItems", 'a'})}
)

// draftOf returns the draft a "$schema" URL names, or nil for any other URL.
func draftOf(s string) *draftSpec {
	if strings.IndexByte(s, '#') >= 0 {
		u, frag, _ := strings.Cut(s, "#")
		if frag != "" {
			return nil
		}
		s = u
	}
	if t, ok := strings.CutPrefix(s, "http://"); ok {
		s = t
	} else {
		s, _ = strings.CutPrefix(s, "https://")
	}
	switch s {
	case "json-schema.org/schema", "json-schema.org/draft/2020-12/schema":
		return draft2020Spec
	case "json-schema.org/draft/2019-09/schema":
		return draft2019Spec
	case "json-schema.org/draft-07/schema":
		return draft7Spec
	case "json-schema.org/draft-06/schema":
		return draft6Spec
	case "json-schema.org/draft-04/schema":
		return draft4Spec
	}
	return nil
}

// getID is the document's base-changing id of obj in draft d ("" for none).
func (d *draftSpec) getID(obj map[string]any) string {
	if d.version < 2019 {
		if _, ok := obj["$ref"]; ok {
			return "" // draft 4 to 7: every other keyword beside $ref is ignored
		}
	}
	id, ok := obj[d.idKey].(string)
	if !ok {
		return ""
	}
	id, _, _ = strings.Cut(id, "#")
	return id
}

// resource is a schema resource: the root or a subschema with an id.
type resource struct {
	ptr     string
	id      string // absolute URL, no fragment
	draft   *draftSpec
	anchors map[string]string // anchor -> pointer
	dynamic []string          // anchors that are $dynamicAnchor
}

type fastLoad struct {
	c      *Compiler
	doc    any
	url    string
	engine jsonschema.RegexpEngine
	root   *resource
	byPtr  map[string]*resource
	byID   map[string]*resource
	// the subschema positions (the library's "processed" locations) and the
	// locations references name
	nodes   map[string]*lnode
	queue   []*lnode
	regexes map[string]regexResult
	// ids two subschemas share, and where the later ones are (pointer, keyword)
	dupIDs  map[string]bool
	strip   [][2]string
	bases   map[string]*url.URL
	formats map[string]*jsonschema.Format
}

// lnode is a location in the document: a subschema position (processed, with its
// value) or a location a reference names, and its Schema once enqueued.
type lnode struct {
	ptr       string
	v         any
	processed bool
	s         *jsonschema.Schema
	res       *resource // its resource, once known
}

type regexResult struct {
	re  jsonschema.Regexp
	err error
}

// loadFast loads doc as the library would, or returns errUseLibrary. libDoc is the
// document for the library's own compile: doc, less the ids it would refuse as
// duplicates (see collect). dynamic reports a keyword of dynamic scope or unevaluated*
// in a loaded subschema: the values of such a graph are for the library to validate.
func (c *Compiler) loadFast(doc any) (sch *jsonschema.Schema, libDoc any, dynamic bool, err error) {
	if c.opts.SchemaLoader != nil {
		return nil, nil, false, errUseLibrary
	}
	l := &fastLoad{c: c, doc: doc, url: schemaURL, engine: c.regexpEngine(c.opts.Lenient),
		byPtr: map[string]*resource{}, byID: map[string]*resource{}, nodes: map[string]*lnode{},
		regexes: map[string]regexResult{}, bases: map[string]*url.URL{}, dupIDs: map[string]bool{}}
	if err := l.collect(doc, "", nil, true); err != nil {
		return nil, nil, false, err
	}
	if sch, err = l.compile(); err != nil {
		return nil, nil, false, err
	}
	libDoc = doc
	for _, st := range l.strip {
		libDoc = withoutMember(libDoc, strings.Split(st[0], "/")[1:], st[1])
	}
	for _, n := range l.queue {
		s := n.s
		if s.DynamicRef != nil || s.RecursiveRef != nil || s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil {
			dynamic = true
			break
		}
	}
	return sch, libDoc, dynamic, nil
}

// withoutMember returns v with member key of the object at the path toks (JSON
// pointer tokens) renamed to an unknown keyword, copying what it changes.
func withoutMember(v any, toks []string, key string) any {
	switch t := v.(type) {
	case map[string]any:
		c := maps.Clone(t)
		if len(toks) == 0 {
			// renamed rather than removed: an object of only an id stays non-empty
			// (the library compiles an empty one as the schema true)
			c["x-duplicate-"+key] = c[key]
			delete(c, key)
			return c
		}
		k := strings.ReplaceAll(strings.ReplaceAll(toks[0], "~1", "/"), "~0", "~")
		c[k] = withoutMember(t[k], toks[1:], key)
		return c
	case []any:
		if len(toks) == 0 {
			break
		}
		if i, err := strconv.Atoi(toks[0]); err == nil && i >= 0 && i < len(t) {
			c := slices.Clone(t)
			c[i] = withoutMember(t[i], toks[1:], key)
			return c
		}
	}
	return v
}

// regex compiles a pattern once per document.
func (l *fastLoad) regex(p string) (jsonschema.Regexp, error) {
	if r, ok := l.regexes[p]; ok {
		return r.re, r.err
	}
	re, err := l.engine(p)
	l.regexes[p] = regexResult{re, err}
	return re, err
}

// invalid is a refusal of the document at pointer ptr (keyword kw).
func invalid(kw, ptr string, format string, args ...any) error {
	return &CompileError{Reason: ReasonInvalidSchema, Keyword: kw, Pointer: ptrOrRoot(ptr), Err: fmt.Errorf(format, args...)}
}

func ptrOrRoot(ptr string) string {
	if ptr == "" {
		return "/"
	}
	return ptr
}

// join resolves ref against the absolute URL base as the library does (ref's
// fragment decoded and returned apart).
func (l *fastLoad) join(base, ref string) (string, string, error) {
	bu, ok := l.bases[base]
	if !ok {
		var err error
		if bu, err = url.Parse(base); err != nil {
			return "", "", err
		}
		l.bases[base] = bu
	}
	r, frag, _ := strings.Cut(ref, "#")
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return "", "", err
	}
	ru, err := url.Parse(r)
	if err != nil {
		return "", "", err
	}
	res := bu.ResolveReference(ru)
	if !ru.IsAbs() && bu.Opaque != "" {
		res.Opaque = bu.Opaque
	}
	return res.String(), frag, nil
}

func appendPtr(ptr, tok string) string {
	if strings.IndexByte(tok, '~') >= 0 {
		tok = strings.ReplaceAll(tok, "~", "~0")
	}
	if strings.IndexByte(tok, '/') >= 0 {
		tok = strings.ReplaceAll(tok, "/", "~1")
	}
	return ptr + "/" + tok
}

// collect records the resources and anchors of the subschema v at ptr (base: the
// enclosing resource's URL; parent: its draft), and every subschema position's value.
//
// With meta, collect also checks the subschema against the metaschema rules of the
// document's draft (validate); the positions the metaschema does not describe (2020's
// additionalItems) are not checked, as the library's validation does not check them.
func (l *fastLoad) collect(v any, ptr string, cur *resource, meta bool) error {
	n := l.nodes[ptr]
	if n == nil {
		n = &lnode{ptr: ptr}
		l.nodes[ptr] = n
	} else if n.processed {
		return nil
	}
	n.v, n.processed = v, true
	parent, base := draft2020Spec, l.url
	if cur != nil {
		parent, base = cur.draft, cur.id
	}
	obj, ok := v.(map[string]any)
	if !ok {
		if ptr == "" {
			l.root = &resource{ptr: "", id: base, draft: parent, anchors: map[string]string{}}
			l.byPtr[""], l.byID[base] = l.root, l.root
		}
		if meta && ptr == "" {
			// (below the root, the parent's validate checked the type)
			return schemaType(v, ptr, l.root.draft)
		}
		return nil
	}
	draft, own := parent, false
	if s, ok := obj["$schema"].(string); ok {
		if draft = draftOf(s); draft == nil {
			return errUseLibrary
		}
		own = true
	}
	id := draft.getID(obj)
	if id == "" && ptr != "" {
		draft, own = parent, false
		id = draft.getID(obj)
	}
	var res *resource
	if id != "" {
		u, _, err := l.join(base, id)
		if err != nil {
			return invalid(draft.idKey, ptr, "error in parsing id %q: %v", id, err)
		}
		res = &resource{ptr: ptr, id: u, anchors: map[string]string{}}
	} else if ptr == "" {
		res = &resource{ptr: ptr, id: base, anchors: map[string]string{}}
	}
	if res != nil {
		res.draft = parent
		if own {
			res.draft = draft
		}
		if ptr == "" {
			l.root = res
		} else if res.draft != l.root.draft {
			return errUseLibrary // an embedded resource in another draft
		}
		if l.byID[res.id] != nil {
			// another subschema has this id: a label, harmless unless a reference
			// resolves against it (ref refuses that); the library, which refuses
			// every duplicate, is given the document without this one
			l.dupIDs[res.id] = true
			l.strip = append(l.strip, [2]string{ptr, draft.idKey})
		} else {
			l.byID[res.id] = res
		}
		l.byPtr[ptr] = res
		cur = res
	}
	n.res = cur
	if err := l.collectAnchors(obj, ptr, cur); err != nil {
		return err
	}
	if _, ok := obj["$vocabulary"]; ok && draft.version >= 2019 {
		return errUseLibrary
	}
	var rules metaRules
	if meta {
		if err := l.validate(obj, ptr, l.root.draft); err != nil {
			return err
		}
		rules = l.root.draft.meta()
	}
	for _, sp := range draft.subs {
		x, ok := obj[sp.kw]
		if !ok {
			continue
		}
		kp := appendPtr(ptr, sp.kw)
		m := meta && schemaRule(rules[sp.kw])
		switch sp.kind {
		case 's':
			if err := l.collect(x, kp, cur, m); err != nil {
				return err
			}
		case 'm':
			if mm, ok := x.(map[string]any); ok {
				for k, y := range mm {
					if err := l.collect(y, appendPtr(kp, k), cur, m); err != nil {
						return err
					}
				}
			}
		case 'a':
			if a, ok := x.([]any); ok {
				for i, y := range a {
					if err := l.collect(y, kp+"/"+strconv.Itoa(i), cur, m); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func (l *fastLoad) collectAnchors(obj map[string]any, ptr string, res *resource) error {
	add := func(kw, a string) error {
		if p, ok := res.anchors[a]; ok {
			if p == ptr {
				return nil
			}
			return invalid(kw, ptr, "duplicate anchor %q: also at %s", a, ptrOrRoot(p))
		}
		res.anchors[a] = ptr
		return nil
	}
	v := res.draft.version
	if v < 2019 {
		if _, ok := obj["$ref"]; ok {
			return nil
		}
		if id, ok := obj[res.draft.idKey].(string); ok {
			_, frag, _ := strings.Cut(id, "#")
			frag, err := url.PathUnescape(frag)
			if err != nil {
				return invalid(res.draft.idKey, ptr, "error in parsing anchor of id %q", id)
			}
			if frag != "" && frag[0] != '/' {
				if err := add(res.draft.idKey, frag); err != nil {
					return err
				}
			}
		}
	}
	if v >= 2019 {
		if a, ok := obj["$anchor"].(string); ok {
			if err := add("$anchor", a); err != nil {
				return err
			}
		}
	}
	if v >= 2020 {
		if a, ok := obj["$dynamicAnchor"].(string); ok {
			if err := add("$dynamicAnchor", a); err != nil {
				return err
			}
			res.dynamic = append(res.dynamic, a)
		}
	}
	return nil
}

// resourceOf is the innermost resource whose pointer is a prefix of ptr.
func (l *fastLoad) resourceOf(ptr string) *resource {
	for {
		if r, ok := l.byPtr[ptr]; ok {
			return r
		}
		i := strings.LastIndexByte(ptr, '/')
		if i < 0 {
			return l.root
		}
		ptr = ptr[:i]
	}
}

// location is the library's Schema.Location of the subschema at ptr.
func (l *fastLoad) location(ptr string) string {
	plain := true
	for i := 0; i < len(ptr) && plain; i++ {
		c := ptr[i]
		plain = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~$&+=:@/", c) >= 0
	}
	if plain {
		return l.url + "#" + ptr
	}
	var sb strings.Builder
	sb.Grow(len(l.url) + 1 + len(ptr))
	sb.WriteString(l.url)
	sb.WriteByte('#')
	for i, tok := range strings.Split(ptr, "/") {
		if i > 0 {
			sb.WriteByte('/')
		}
		sb.WriteString(url.PathEscape(tok))
	}
	return sb.String()
}

func (l *fastLoad) enqueue(ptr string) *jsonschema.Schema {
	n := l.nodes[ptr]
	if n == nil {
		n = &lnode{ptr: ptr}
		l.nodes[ptr] = n
	}
	if n.s == nil {
		n.s = &jsonschema.Schema{Location: l.location(ptr)}
		l.queue = append(l.queue, n)
	}
	return n.s
}

// lookupPtr resolves a JSON pointer in the document as the library does.
func lookupPtr(v any, ptr string) (any, error) {
	if ptr == "" {
		return v, nil
	}
	for _, tok := range strings.Split(ptr, "/")[1:] {
		if strings.IndexByte(tok, '~') >= 0 {
			var sb strings.Builder
			for i := 0; i < len(tok); i++ {
				if tok[i] != '~' {
					sb.WriteByte(tok[i])
					continue
				}
				if i+1 == len(tok) || (tok[i+1] != '0' && tok[i+1] != '1') {
					return nil, fmt.Errorf("invalid JSON pointer %q", ptr)
				}
				sb.WriteByte("~/"[tok[i+1]-'0'])
				i++
			}
			tok = sb.String()
		}
		switch t := v.(type) {
		case map[string]any:
			if x, ok := t[tok]; ok {
				v = x
				continue
			}
		case []any:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(t) {
				v = t[i]
				continue
			}
		}
		return nil, fmt.Errorf("JSON pointer %q not found", ptr)
	}
	return v, nil
}

func (l *fastLoad) compile() (*jsonschema.Schema, error) {
	root := l.enqueue("")
	for i := 0; i < len(l.queue); i++ {
		n := l.queue[i]
		ptr, v := n.ptr, n.v
		if !n.processed {
			// a reference to a location the draft does not define as a subschema
			// ("#/x-defs/a"): the library loads it as one, checked by the metaschema
			x, err := lookupPtr(l.doc, ptr)
			if err != nil {
				return nil, invalid("$ref", ptr, "%v", err)
			}
			if err := schemaType(x, ptr, l.root.draft); err != nil {
				return nil, err
			}
			if err := l.collect(x, ptr, l.resourceOf(ptr), true); err != nil {
				return nil, err
			}
			if _, ok := l.byPtr[ptr]; !ok {
				if obj, ok := x.(map[string]any); ok {
					if err := l.collectAnchors(obj, ptr, l.resourceOf(ptr)); err != nil {
						return nil, err
					}
				}
			}
			v = x
		}
		if err := l.compileValue(v, n, ptr); err != nil {
			return nil, err
		}
	}
	return root, nil
}

func (l *fastLoad) compileValue(v any, n *lnode, ptr string) error {
	s, res := n.s, n.res
	if res == nil {
		res = l.resourceOf(ptr)
	}
	s.DraftVersion = res.draft.version
	l.enqueue(res.ptr)
	if res.draft.version >= 2020 && ptr == res.ptr {
		for a, ap := range res.anchors {
			if slices.Contains(res.dynamic, a) {
				l.enqueue(ap)
			}
		}
	}
	switch v := v.(type) {
	case bool:
		s.Bool = &v
	case map[string]any:
		if len(v) == 0 {
			t := true
			s.Bool = &t
			return nil
		}
		oc := objLoad{l: l, obj: v, ptr: ptr, res: res}
		for k := range v {
			oc.keys |= keyBit(k)
		}
		return oc.compile(s)
	}
	return nil
}

// objLoad fills one Schema from its JSON object, keyword by keyword as the library's
// compiler does.
type objLoad struct {
	l    *fastLoad
	obj  map[string]any
	ptr  string
	res  *resource
	keys uint64 // keyBit of every member name: most keywords are absent
}

func keyBit(k string) uint64 {
	if k == "" {
		return 1
	}
	return 1 << ((uint(len(k))*7 + uint(k[0]) + uint(k[len(k)-1])*3) & 63)
}

// get is obj[kw].
func (c *objLoad) get(kw string) (any, bool) {
	if c.keys&keyBit(kw) == 0 {
		return nil, false
	}
	v, ok := c.obj[kw]
	return v, ok
}

// val is obj[kw] (nil if absent).
func (c *objLoad) val(kw string) any {
	v, _ := c.get(kw)
	return v
}

func (c *objLoad) compile(s *jsonschema.Schema) error {
	d := c.res.draft
	s.ID = d.getID(c.obj)
	if s.DraftVersion < 2019 {
		if id := c.str(d.idKey); id != "" {
			if _, f, ok := strings.Cut(id, "#"); ok && f != "" {
				a, err := url.PathUnescape(f)
				if err != nil {
					return invalid(d.idKey, c.ptr, "error in parsing anchor of id %q", id)
				}
				s.Anchor = a
			}
		}
	} else {
		s.Anchor = c.str("$anchor")
	}
	if err := c.draft4(s); err != nil {
		return err
	}
	if s.DraftVersion >= 6 {
		s.Contains = c.prop("contains")
		s.PropertyNames = c.prop("propertyNames")
		if v, ok := c.get("const"); ok {
			s.Const = &v
		}
	}
	if s.DraftVersion >= 7 {
		s.If = c.prop("if")
		if s.If != nil {
			b, isBool := c.val("if").(bool)
			if !isBool || b {
				s.Then = c.prop("then")
			}
			if !isBool || !b {
				s.Else = c.prop("else")
			}
		}
		s.Comment = c.str("$comment")
		s.ReadOnly = c.boolean("readOnly")
		s.WriteOnly = c.boolean("writeOnly")
		if a, ok := c.val("examples").([]any); ok {
			s.Examples = a
		}
	}
	if s.DraftVersion >= 2019 {
		var err error
		if s.RecursiveRef, err = c.ref("$recursiveRef"); err != nil {
			return err
		}
		s.RecursiveAnchor = c.boolean("$recursiveAnchor")
		if s.Contains != nil {
			s.MinContains = c.intVal("minContains")
			s.MaxContains = c.intVal("maxContains")
		}
		if m, ok := c.val("dependentRequired").(map[string]any); ok {
			s.DependentRequired = map[string][]string{}
			for k, v := range m {
				if a, ok := v.([]any); ok {
					s.DependentRequired[k] = stringsOf(a)
				}
			}
		}
		s.DependentSchemas = c.members("dependentSchemas")
		s.UnevaluatedItems = c.prop("unevaluatedItems")
		s.UnevaluatedProperties = c.prop("unevaluatedProperties")
		s.Deprecated = c.boolean("deprecated")
	}
	if s.DraftVersion >= 2020 {
		dr, err := c.ref("$dynamicRef")
		if err != nil {
			return err
		}
		if dr != nil {
			_, f, _ := strings.Cut(c.str("$dynamicRef"), "#")
			f, err := url.PathUnescape(f)
			if err != nil {
				return invalid("$dynamicRef", c.ptr, "error in parsing %q: %v", c.str("$dynamicRef"), err)
			}
			anchor := ""
			if f != "" && f[0] != '/' {
				anchor = f
			}
			s.DynamicRef = &jsonschema.DynamicRef{Ref: dr, Anchor: anchor}
		}
		s.DynamicAnchor = c.str("$dynamicAnchor")
		s.PrefixItems = c.items("prefixItems")
		s.Items2020 = c.prop("items")
	}
	return nil
}

func (c *objLoad) draft4(s *jsonschema.Schema) error {
	var err error
	if s.Ref, err = c.ref("$ref"); err != nil {
		return err
	}
	if s.DraftVersion < 2019 && s.Ref != nil {
		return nil // draft 4 to 7: every other keyword of this draft beside $ref is ignored
	}
	s.AllOf = c.items("allOf")
	s.AnyOf = c.items("anyOf")
	s.OneOf = c.items("oneOf")
	s.Not = c.prop("not")
	if s.DraftVersion < 2020 {
		if items, ok := c.get("items"); ok {
			if _, ok := items.([]any); ok {
				s.Items = c.items("items")
				s.AdditionalItems = c.additional("additionalItems")
			} else {
				s.Items = c.prop("items")
			}
		}
	}
	s.Properties = c.members("properties")
	if m := c.members("patternProperties"); m != nil {
		s.PatternProperties = make(map[jsonschema.Regexp]*jsonschema.Schema, len(m))
		for k, sub := range m {
			re, err := c.l.regex(k)
			if err != nil {
				return regexRefusal("patternProperties", appendPtr(appendPtr(c.ptr, "patternProperties"), k), err)
			}
			s.PatternProperties[re] = sub
		}
	}
	s.AdditionalProperties = c.additional("additionalProperties")
	if m, ok := c.val("dependencies").(map[string]any); ok {
		s.Dependencies = make(map[string]any, len(m))
		for k, v := range m {
			if a, ok := v.([]any); ok {
				s.Dependencies[k] = stringsOf(a)
			} else {
				s.Dependencies[k] = c.l.enqueue(appendPtr(appendPtr(c.ptr, "dependencies"), k))
			}
		}
	}
	if t, ok := c.get("type"); ok {
		s.Types = typesOfValue(t)
	}
	if a, ok := c.val("enum").([]any); ok {
		s.Enum = enumOf(a)
	}
	s.MultipleOf = c.num("multipleOf")
	s.Maximum = c.num("maximum")
	if c.boolean("exclusiveMaximum") {
		s.ExclusiveMaximum, s.Maximum = s.Maximum, nil
	} else {
		s.ExclusiveMaximum = c.num("exclusiveMaximum")
	}
	s.Minimum = c.num("minimum")
	if c.boolean("exclusiveMinimum") {
		s.ExclusiveMinimum, s.Minimum = s.Minimum, nil
	} else {
		s.ExclusiveMinimum = c.num("exclusiveMinimum")
	}
	s.MinLength = c.intVal("minLength")
	s.MaxLength = c.intVal("maxLength")
	if p, ok := c.val("pattern").(string); ok {
		if s.Pattern, err = c.l.regex(p); err != nil {
			return regexRefusal("pattern", appendPtr(c.ptr, "pattern"), err)
		}
	}
	s.MinItems = c.intVal("minItems")
	s.MaxItems = c.intVal("maxItems")
	s.UniqueItems = c.boolean("uniqueItems")
	s.MaxProperties = c.intVal("maxProperties")
	s.MinProperties = c.intVal("minProperties")
	if a, ok := c.val("required").([]any); ok {
		s.Required = stringsOf(a)
	}
	if f, ok := c.val("format").(string); ok && (!c.l.c.opts.FormatAnnotation || s.DraftVersion < 2019) {
		s.Format = c.l.format(f)
	}
	s.Title = c.str("title")
	s.Description = c.str("description")
	if v, ok := c.get("default"); ok {
		s.Default = &v
	}
	return nil
}

// regexRefusal is the compile error for a pattern the engine refuses.
func regexRefusal(kw, ptr string, err error) error {
	var re *RegexError
	if errors.As(err, &re) && re.Feature != "" {
		return &CompileError{Reason: ReasonRegex, Keyword: kw, Pointer: ptr, Err: err}
	}
	return &CompileError{Reason: ReasonInvalidSchema, Keyword: kw, Pointer: ptr, Err: err}
}

func (c *objLoad) str(kw string) string {
	s, _ := c.val(kw).(string)
	return s
}

func (c *objLoad) boolean(kw string) bool {
	b, _ := c.val(kw).(bool)
	return b
}

func (c *objLoad) num(kw string) *big.Rat {
	v, ok := c.get(kw)
	if !ok {
		return nil
	}
	if n, ok := v.(json.Number); ok {
		if r, ok := new(big.Rat).SetString(string(n)); ok {
			return r
		}
	}
	return nil
}

// intVal is the library's integer reading of a number keyword (wrapping as it does).
func (c *objLoad) intVal(kw string) *int {
	if n := c.num(kw); n != nil && n.IsInt() {
		i := int(n.Num().Int64())
		return &i
	}
	return nil
}

func (c *objLoad) prop(kw string) *jsonschema.Schema {
	if _, ok := c.get(kw); !ok {
		return nil
	}
	return c.l.enqueue(appendPtr(c.ptr, kw))
}

func (c *objLoad) items(kw string) []*jsonschema.Schema {
	a, ok := c.val(kw).([]any)
	if !ok {
		return nil
	}
	kp := appendPtr(c.ptr, kw)
	out := make([]*jsonschema.Schema, len(a))
	for i := range a {
		out[i] = c.l.enqueue(kp + "/" + strconv.Itoa(i))
	}
	return out
}

func (c *objLoad) members(kw string) map[string]*jsonschema.Schema {
	m, ok := c.val(kw).(map[string]any)
	if !ok {
		return nil
	}
	kp := appendPtr(c.ptr, kw)
	out := make(map[string]*jsonschema.Schema, len(m))
	for k := range m {
		out[k] = c.l.enqueue(appendPtr(kp, k))
	}
	return out
}

func (c *objLoad) additional(kw string) any {
	if b, ok := c.val(kw).(bool); ok {
		return b
	}
	if s := c.prop(kw); s != nil {
		return s
	}
	return nil
}

func (c *objLoad) ref(kw string) (*jsonschema.Schema, error) {
	r, ok := c.val(kw).(string)
	if !ok {
		return nil, nil
	}
	if c.l.dupIDs[c.res.id] {
		return nil, invalid(kw, c.ptr, "%q resolves against the id %q, which several subschemas have", r, c.res.id)
	}
	u, frag, err := c.l.join(c.res.id, r)
	if err != nil {
		return nil, invalid(kw, c.ptr, "error in parsing %q: %v", r, err)
	}
	if c.l.dupIDs[u] {
		return nil, invalid(kw, c.ptr, "%q names the id %q, which several subschemas have", r, u)
	}
	var target *resource
	if u == c.l.url {
		target = c.l.root
	} else if target = c.l.byID[u]; target == nil {
		return nil, errUseLibrary // outside the document
	}
	var ptr string
	if frag == "" || frag[0] == '/' {
		ptr = target.ptr + frag
	} else {
		p, ok := target.anchors[frag]
		if !ok {
			return nil, invalid(kw, c.ptr, "anchor %q of %q not found", frag, r)
		}
		ptr = p
	}
	return c.l.enqueue(ptr), nil
}

func stringsOf(a []any) []string {
	var out []string
	for _, x := range a {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func typesOfValue(v any) *jsonschema.Types {
	var t jsonschema.Types
	switch v := v.(type) {
	case string:
		t.Add(v)
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				t.Add(s)
			}
		}
	}
	if t.IsEmpty() {
		return nil
	}
	return &t
}

// enumOf is the Enum the grammar reads (its values). The library's validator also
// needs a private summary of their types, which only its compiler fills: a tree from
// loadFast is never given to that validator (fastValid decides on it).
func enumOf(a []any) *jsonschema.Enum {
	return &jsonschema.Enum{Values: a}
}

// format is the library's Format for name, as its compiler picks it: "regex" with
// our engine, the registered strict formats, then the library's own; nil if unknown.
func (l *fastLoad) format(name string) *jsonschema.Format {
	if name == "regex" {
		return &jsonschema.Format{Name: "regex", Validate: func(v any) error {
			s, ok := v.(string)
			if !ok {
				return nil
			}
			_, err := l.engine(s)
			return err
		}}
	}
	for _, f := range strictFormats {
		if f.Name == name {
			return f
		}
	}
	return libraryFormat(name)
}

var libFormats sync.Map // name -> *jsonschema.Format (nil for unknown)

// libraryFormat returns the library's own Format of that name, taken from a schema
// the library compiles with only that keyword.
func libraryFormat(name string) *jsonschema.Format {
	if f, ok := libFormats.Load(name); ok {
		return f.(*jsonschema.Format)
	}
	jc := jsonschema.NewCompiler()
	jc.AssertFormat()
	var f *jsonschema.Format
	if err := jc.AddResource("mem://deepinfer/format.json", map[string]any{"format": name}); err == nil {
		if s, err := jc.Compile("mem://deepinfer/format.json"); err == nil {
			f = s.Format
		}
	}
	libFormats.Store(name, f)
	return f
}
