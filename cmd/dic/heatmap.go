package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"deepinfer/plan"
)

// slotGrid is a role's expert map as a grid: column = physical slot, row = MoE layer,
// value = the logical expert in that slot.
type slotGrid struct {
	lp []plan.LayerPlacement
}

func (g slotGrid) Dims() (c, r int)   { return len(g.lp[0].Phy2Log), len(g.lp) }
func (g slotGrid) Z(c, r int) float64 { return float64(g.lp[r].Phy2Log[c]) }
func (g slotGrid) X(c int) float64    { return float64(c) }
func (g slotGrid) Y(r int) float64    { return float64(g.lp[r].Layer) }

// writeHeatmaps draws each role's expert map to path (the extension, .png or .svg,
// picks the format; with several roles the role name is added before it).
func writeHeatmaps(path string, p *plan.Plan) ([]string, error) {
	if p.Deployment == nil {
		return nil, fmt.Errorf("the plan has no deployment (compile with --spec) and so no expert map")
	}
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".png" && ext != ".svg" {
		return nil, fmt.Errorf("--heatmap %s: want a .png or .svg file", path)
	}
	var files []string
	for _, r := range p.Deployment.Roles {
		if len(r.Placement) == 0 {
			continue
		}
		pl := plot.New()
		slots := len(r.Placement[0].Phy2Log) / r.EP
		pl.Title.Text = fmt.Sprintf("%s: logical expert in each physical slot (%d ranks × %d slots, balancedness %.4f)", r.Name, r.EP, slots, r.Balancedness)
		pl.X.Label.Text = fmt.Sprintf("physical slot (rank = slot / %d)", slots)
		pl.Y.Label.Text = "MoE layer"
		pl.Add(plotter.NewHeatMap(slotGrid{r.Placement}, moreland.SmoothBlueRed().Palette(255)))
		out := path
		if len(p.Deployment.Roles) > 1 {
			out = strings.TrimSuffix(path, ext) + "-" + r.Name + ext
		}
		if err := pl.Save(10*vg.Inch, 6*vg.Inch, out); err != nil {
			return nil, err
		}
		files = append(files, out)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no role of this plan spreads its experts over ranks")
	}
	return files, nil
}
