package main

import (
	"bytes"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"deepinfer/targets/cost"
)

// costCmd adds the target cost model's predicted_us column to a kernel table.
//
//	dic cost --target h200 --csv IN [--out OUT] [--launch eager|device]
func costCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cost", flag.ContinueOnError)
	target := fs.String("target", "h200", "target whose cost model predicts: h200, sm100 or ascend950")
	in := fs.String("csv", "", "kernel table: op,dtype,m,n,k,groups,extra[,median_us] (other columns pass through)")
	out := fs.String("out", "-", "output CSV (- for stdout)")
	launch := fs.String("launch", "eager", "eager: a lone torch call timed with events, as the dev table was; device: device time alone")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{Err: fmt.Errorf("cost takes no positional arguments (got %q); use --csv FILE", pos[0])}
	}
	if *in == "" {
		return usageError{Err: fmt.Errorf("cost needs --csv FILE")}
	}
	mode := cost.Launch(*launch)
	if mode != cost.Eager && mode != cost.Device {
		return usageError{Err: fmt.Errorf("--launch %q: want eager or device", *launch)}
	}
	model, err := cost.For(*target)
	if err != nil {
		return usageError{Err: err}
	}
	model = model.WithLaunch(mode)
	t, err := cost.ReadTableFile(*in)
	if err != nil {
		return err
	}
	pred, acc, err := model.Evaluate(t)
	if err != nil {
		return err
	}

	// Rewrite the table with predicted_us appended (or replaced, if present).
	col := -1
	for i, h := range t.Header {
		if h == "predicted_us" {
			col = i
		}
	}
	header := append([]string(nil), t.Header...)
	if col < 0 {
		header = append(header, "predicted_us")
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(header)
	for i, rec := range t.Records {
		row := append([]string(nil), rec...)
		v := strconv.FormatFloat(pred[i], 'f', 3, 64)
		if col < 0 {
			row = append(row, v)
		} else {
			row[col] = v
		}
		_ = w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	dest := *out
	if dest == "-" {
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			return err
		}
		dest = "stdout"
	} else if err := writeAtomic(dest, buf.Bytes()); err != nil {
		return err
	}
	if t.HasMeasured() {
		fmt.Fprintf(stderr, "dic cost: predicted_us is a prediction of %s (%s launch); against median_us: median rel err %.1f%%, p90 %.1f%% over %d rows; wrote %s\n",
			model.ID(), mode, 100*acc.Median, 100*acc.P90, acc.N, dest)
	} else {
		fmt.Fprintf(stderr, "dic cost: predicted_us is a prediction of %s (%s launch) for %d rows; wrote %s\n",
			model.ID(), mode, len(pred), dest)
	}
	return nil
}

// writeAtomic writes data to path through a temporary file in the same directory.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
