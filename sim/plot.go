package sim

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// WritePlots draws, per role, the time per layer of a representative step and the
// roofline points of its kernels, as PNG and SVG. It returns the file names.
func WritePlots(dir string, r *Result) ([]string, error) {
	var files []string
	for _, rr := range r.Roles {
		p, err := layerPlot(&rr, r.Model)
		if err != nil {
			return nil, err
		}
		q, err := rooflinePlot(&rr, r.Model)
		if err != nil {
			return nil, err
		}
		for _, ext := range []string{"png", "svg"} {
			for name, pl := range map[string]*plot.Plot{"layers": p, "roofline": q} {
				f := fmt.Sprintf("%s-%s.%s", rr.Role, name, ext)
				if err := pl.Save(9*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, f)); err != nil {
					return nil, err
				}
				files = append(files, f)
			}
		}
	}
	sort.Strings(files)
	return files, nil
}

func layerPlot(rr *RoleResult, model string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: time per layer of one %.0f-token step (simulated: %s)", rr.Role, rr.MeanTokens, short(model))
	p.X.Label.Text = "layer (-1: embedding and head)"
	p.Y.Label.Text = "µs (predicted)"
	var layers []int
	for l := range rr.LayerUS {
		layers = append(layers, l)
	}
	sort.Ints(layers)
	vals := make(plotter.Values, len(layers))
	labels := make([]string, len(layers))
	for i, l := range layers {
		vals[i] = rr.LayerUS[l]
		labels[i] = fmt.Sprint(l)
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(6))
	if err != nil {
		return nil, err
	}
	p.Add(bars)
	p.NominalX(labels...)
	return p, nil
}

func rooflinePlot(rr *RoleResult, model string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: kernels of one step on the roofline (simulated: %s)", rr.Role, short(model))
	p.X.Label.Text = "arithmetic intensity (FLOP/byte)"
	p.Y.Label.Text = "achieved TFLOP/s (predicted)"
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{}
	p.Y.Tick.Marker = plot.LogTicks{}
	var pts plotter.XYs
	for _, c := range rr.Roofline {
		if c.Comm || c.FLOPs <= 0 || c.Bytes <= 0 || c.US <= 0 {
			continue
		}
		pts = append(pts, plotter.XY{X: c.FLOPs / c.Bytes, Y: c.FLOPs / c.US / 1e6})
	}
	if len(pts) == 0 {
		pts = append(pts, plotter.XY{X: 1, Y: 1})
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return nil, err
	}
	p.Add(sc)
	return p, nil
}

// short cuts a cost model's ID to its name and version, for plot titles.
func short(model string) string {
	if i := strings.Index(model, " ("); i > 0 {
		return model[:i]
	}
	return model
}
