package passes

import (
	"html/template"
	"os"
	"path/filepath"
)

// writeHTML writes index.html beside the per-pass dumps: one column per pass, like
// GOSSAFUNC's ssa.html, with the passes that changed nothing collapsed to their name.
func writeHTML(dir string, dumps []dumped) error {
	type column struct {
		Name      string
		Text      string
		Unchanged bool
	}
	cols := make([]column, len(dumps))
	for i, d := range dumps {
		cols[i] = column{Name: d.name, Text: d.text, Unchanged: i > 0 && d.text == dumps[i-1].text}
	}
	f, err := os.Create(filepath.Join(dir, "index.html"))
	if err != nil {
		return err
	}
	err = page.Execute(f, cols)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

var page = template.Must(template.New("passes").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>IR after each pass</title>
<style>
body { margin: 0; font: 12px monospace; }
.cols { display: flex; height: 100vh; }
.col { flex: 1 1 0; min-width: 0; overflow: auto; border-right: 1px solid #ccc; }
.col h2 { position: sticky; top: 0; margin: 0; padding: 4px; background: #eef; font-size: 13px; }
.col pre { margin: 4px; white-space: pre; }
.same { flex: 0 0 2.2em; writing-mode: vertical-rl; background: #f6f6f6; color: #888; padding: 4px; }
</style></head><body><div class="cols">
{{range .}}{{if .Unchanged}}<div class="same">{{.Name}}: no change</div>{{else}}<div class="col"><h2>{{.Name}}</h2><pre>{{.Text}}</pre></div>{{end}}
{{end}}</div></body></html>
`))
