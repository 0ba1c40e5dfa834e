// Package browsertest opens pages in headless Chromium for tests: the
// DOM after load, a page's layout at a window size, screenshots. It
// keeps Chromium off the network and out of the user's profile. One
// Chromium serves a test binary (cdp.go); its TestMain stops it with
// Close (leakcheck.After(browsertest.Close)).
package browsertest

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Layout is a page as Chromium lays it out in a window.
type Layout struct {
	// ScrollWidth and ClientWidth are the document's: wider content
	// than the window overflows.
	ScrollWidth, ClientWidth, InnerHeight int
	// Bottom is where the element of the selector ends, from the top.
	Bottom float64
}

var layoutRe = regexp.MustCompile(`data-scroll-width="(\d+)" data-client-width="(\d+)" data-bottom="([\d.]+)" data-inner-height="(\d+)"`)

// Measure lays page out in a w x h window and measures it, with a script
// added to a copy of the page (csp, the page's Content-Security-Policy,
// replaced by one that admits it). selector names the element whose
// bottom is measured.
func Measure(t testing.TB, page, csp, selector string, w, h int) Layout {
	t.Helper()
	probe := strings.Replace(page, csp, `default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'`, 1)
	probe = strings.Replace(probe, "</body>", `<script>
var d = document.documentElement, e = document.querySelector(`+strconv.Quote(selector)+`);
document.body.dataset.scrollWidth = d.scrollWidth; document.body.dataset.clientWidth = d.clientWidth;
document.body.dataset.bottom = e ? e.getBoundingClientRect().bottom : 1e9; document.body.dataset.innerHeight = window.innerHeight;
</script></body>`, 1)
	file := filepath.Join(t.TempDir(), "probe.html")
	if err := os.WriteFile(file, []byte(probe), 0o644); err != nil {
		t.Fatal(err)
	}
	m := layoutRe.FindStringSubmatch(dom(t, "file://"+file, w, h))
	if m == nil {
		t.Fatalf("%dx%d: Chromium measured no layout", w, h)
	}
	var l Layout
	l.ScrollWidth, _ = strconv.Atoi(m[1])
	l.ClientWidth, _ = strconv.Atoi(m[2])
	l.Bottom, _ = strconv.ParseFloat(m[3], 64)
	l.InnerHeight, _ = strconv.Atoi(m[4])
	// A window of w x h shows about (w - scroll bar) x (h - browser UI).
	if l.ClientWidth < w-40 || l.InnerHeight < h-200 {
		t.Fatalf("%dx%d: Chromium laid the page out at %dx%d", w, h, l.ClientWidth, l.InnerHeight)
	}
	return l
}

// Screenshot writes file's rendering in a w x h window to png and fails
// t when it is blank.
func Screenshot(t testing.TB, file, png string, w, h int) {
	t.Helper()
	shot(t, "file://"+file, png, w, h)
	if colors := distinctColors(t, png); colors < 20 {
		t.Errorf("%s has %d colors: blank?", png, colors)
	}
}

func distinctColors(t testing.TB, file string) int {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
		}
	}
	return len(seen)
}

// Keep copies an artifact into $TEST_ARTIFACTS when CI sets it.
func Keep(t testing.TB, file string) {
	t.Helper()
	dir := os.Getenv("TEST_ARTIFACTS")
	if dir == "" {
		return
	}
	b, err := os.ReadFile(file)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, filepath.Base(file)), b, 0o644)
	}
	if err != nil {
		t.Errorf("keeping %s in TEST_ARTIFACTS: %v", file, err)
	}
}

// Screens are the windows a page must fit: a laptop's and a desktop's.
var Screens = []struct{ W, H int }{{1366, 768}, {1920, 1080}}

// CheckFits opens page (written at file) in each of Screens: it must be
// no wider than the window, and the element of selector first must end
// on the first screen. It keeps screenshots in dir, name-WxH.png (the
// first screen) and name-WxH-full.png (the page), and with Keep.
func CheckFits(t testing.TB, page, csp, first, file, dir, name string) {
	t.Helper()
	for _, sc := range Screens {
		l := Measure(t, page, csp, first, sc.W, sc.H)
		if l.ScrollWidth > l.ClientWidth {
			t.Errorf("%s at %dx%d: the page is %d pixels wide in a %d-pixel window: it overflows", name, sc.W, sc.H, l.ScrollWidth, l.ClientWidth)
		}
		if l.Bottom > float64(l.InnerHeight) {
			t.Errorf("%s at %dx%d: %s ends at %.0f pixels, below the first screen (%d)", name, sc.W, sc.H, first, l.Bottom, l.InnerHeight)
		}
		for _, shot := range []struct {
			suffix string
			h      int
		}{{"", sc.H}, {"-full", 6000}} {
			png := filepath.Join(dir, fmt.Sprintf("%s-%dx%d%s.png", name, sc.W, sc.H, shot.suffix))
			Screenshot(t, file, png, sc.W, shot.h)
			Keep(t, png)
		}
	}
	Keep(t, file)
}
