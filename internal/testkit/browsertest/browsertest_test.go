package browsertest

import (
	stdpng "image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m, leakcheck.After(Close)) }

// TestWindow: a page laid out in the windows of Screens sees the
// viewport --window-size gives headless Chromium (the window less the
// browser's frame: 1351x625 of 1366x768), its DOM as --dump-dom prints
// it, and a screenshot of it is an image of the window.
func TestWindow(t *testing.T) {
	dir := t.TempDir()
	page := `<html><head><meta http-equiv="Content-Security-Policy" content="CSP"></head><body><div id="a" style="height:300px;background:linear-gradient(red,blue)">x</div><div style="height:3000px">y</div></body></html>`
	file := filepath.Join(dir, "p.html")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ w, h, cw, ih int }{{1366, 768, 1351, 625}, {1920, 1080, 1905, 937}} {
		l := Measure(t, page, "CSP", "#a", tc.w, tc.h)
		if l.ClientWidth != tc.cw || l.InnerHeight != tc.ih || l.ScrollWidth != tc.cw || l.Bottom != 308 {
			t.Errorf("%dx%d: %+v", tc.w, tc.h, l)
		}
	}
	if dom := DOM(t, "file://"+file); !strings.HasPrefix(dom, "<html><head>") || !strings.Contains(dom, `<div id="a"`) {
		t.Errorf("DOM:\n%s", dom)
	}
	png := filepath.Join(dir, "p.png")
	Screenshot(t, file, png, 1366, 6000)
	f, err := os.Open(png)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if c, err := stdpng.DecodeConfig(f); err != nil || c.Width != 1366 || c.Height != 6000-143 {
		t.Errorf("screenshot %dx%d (%v), want the viewport of a 1366x6000 window", c.Width, c.Height, err)
	}
}
