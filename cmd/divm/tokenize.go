package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"deepinfer/tokenizer"
)

// tokenizeCmd is `divm tokenize`: a JSON-lines filter over DeepSeek's tokenizer.
//
//	in:  "text"            out: {"ids":[...]}
//	--decode
//	in:  {"ids":[...]} or [...]   out: "text"
//
// A line that cannot be processed gets {"error":"line N: reason"} in its place and the
// rest go on; the command fails at the end if any line did.
func tokenizeCmd(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	dir := fs.String("tokenizer", "", "directory with tokenizer.json (default: the fetched DeepSeek-V3 tokenizer; see scripts/fetch-tokenizer.sh)")
	decode := fs.Bool("decode", false, "decode id lists to strings instead of encoding strings")
	addSpecial := fs.Bool("add-special", false, "encode: add BOS as the tokenizer config asks (HF add_special_tokens)")
	skipSpecial := fs.Bool("skip-special", false, "decode: drop special tokens")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageError{Err: fmt.Errorf("tokenize takes no arguments (lines come on stdin)")}
	}
	d := *dir
	if d == "" {
		if d, err = tokenizer.ResolveDir(""); err != nil {
			return err
		}
	} else if st, err := os.Stat(d); err == nil && !st.IsDir() {
		d = filepath.Dir(d) // a path to tokenizer.json itself
	}
	tok, err := tokenizer.LoadBPE(d)
	if err != nil {
		return err
	}

	out := bufio.NewWriter(stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false) // keep "<｜User｜>" readable
	in := bufio.NewReaderSize(stdin, 1<<16)
	lines, failed := 0, 0
	for {
		line, rerr := in.ReadBytes('\n')
		if len(line) == 0 && rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				return rerr
			}
			break
		}
		lines++
		var v any
		var lerr error
		if *decode {
			var ids []int32
			if ids, lerr = parseIDLine(line, tok.NumTokens()); lerr == nil {
				v = tok.Decode(ids, *skipSpecial)
			}
		} else {
			var s string
			if lerr = json.Unmarshal(line, &s); lerr == nil {
				v = struct {
					IDs []int32 `json:"ids"`
				}{tok.Encode(s, *addSpecial)}
			} else {
				lerr = fmt.Errorf("want a JSON string: %w", lerr)
			}
		}
		if lerr != nil {
			failed++
			v = struct {
				Error string `json:"error"`
			}{fmt.Sprintf("line %d: %v", lines, lerr)}
		}
		if err := enc.Encode(v); err != nil {
			return err
		}
		if rerr != nil {
			break
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("tokenize: %d of %d lines failed", failed, lines)
	}
	return nil
}

// parseIDLine reads {"ids":[...]} or a bare array of token ids, each in [0, n).
func parseIDLine(line []byte, n int) ([]int32, error) {
	var raw []int64
	if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &raw); err != nil {
			return nil, fmt.Errorf("want an array of token ids: %w", err)
		}
	} else {
		var obj struct {
			IDs *[]int64 `json:"ids"`
		}
		if err := json.Unmarshal(t, &obj); err != nil || obj.IDs == nil {
			if err == nil {
				err = errors.New(`no "ids" field`)
			}
			return nil, fmt.Errorf(`want {"ids":[...]} or [...]: %w`, err)
		}
		raw = *obj.IDs
	}
	ids := make([]int32, len(raw))
	for i, id := range raw {
		if id < 0 || id >= int64(n) {
			return nil, fmt.Errorf("id %d (index %d) is out of range [0, %d)", id, i, n)
		}
		ids[i] = int32(id)
	}
	return ids, nil
}
