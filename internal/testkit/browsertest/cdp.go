package browsertest

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/need"
)

// One headless Chromium serves every page a test binary opens: a start
// costs about a CPU second, a page in a running browser a tenth of that.
// Each page gets a window (a target) of its own, closed after it; the
// browser is driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: it reads commands on fd 3 and writes replies
// and events on fd 4, each message JSON ended by a NUL), so it listens on
// no port. Operations run one at a time.
type browser struct {
	cmd    *exec.Cmd
	in     *os.File // the browser's fd 3
	out    *os.File // the browser's fd 4
	r      *bufio.Reader
	stderr *os.File
	id     int
}

var (
	mu     sync.Mutex // the browser, one operation at a time
	shared *browser
	dir    string // its profile and stderr, removed by Close
)

// message is a DevTools command, reply or event.
type message struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    any             `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// get returns the running browser, starting it on first use; without
// Chromium it skips t, or fails it when the run requires everything
// (need.Tool).
func get(t testing.TB) *browser {
	t.Helper()
	bin := need.Tool(t, "chromium", "apt-get install chromium to run the browser test (.ci/run does)")
	if shared != nil { // if it died, reading its pipe says so, with its stderr
		return shared
	}
	b, err := start(bin)
	if err != nil {
		t.Fatal(err)
	}
	shared = b
	return b
}

func start(bin string) (*browser, error) {
	var err error
	if dir == "" {
		if dir, err = os.MkdirTemp("", "browsertest-"); err != nil {
			return nil, err
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stderr, err := os.CreateTemp(dir, "stderr-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--remote-debugging-pipe", "--user-data-dir="+dir+"/profile", "about:blank")
	cmd.ExtraFiles = []*os.File{inR, outW} // fd 3, fd 4
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("chromium: %w", err)
	}
	inR.Close()
	outW.Close()
	return &browser{cmd: cmd, in: inW, out: outR, r: bufio.NewReader(outR), stderr: stderr}, nil
}

// Close stops the browser, if a test started it: for a TestMain
// (leakcheck.After). Tests that follow start another.
func Close() {
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		shared.in.Close() // the browser quits when its pipe closes
		done := make(chan struct{})
		go func() { shared.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			shared.cmd.Process.Kill()
			<-done
		}
		shared.out.Close()
		shared.stderr.Close()
		shared = nil
	}
	if dir != "" {
		os.RemoveAll(dir)
		dir = ""
	}
}

func (b *browser) stderrTail() string {
	out, _ := os.ReadFile(b.stderr.Name())
	return string(out[max(0, len(out)-2000):])
}

// call sends a command (to the page of session, or to the browser when
// session is empty) and returns its result; events that arrive meanwhile
// go to seen. deadline bounds the wait.
func (b *browser) call(session, method string, params any, result any, seen func(message), deadline time.Time) error {
	b.id++
	id := b.id
	msg, err := json.Marshal(message{ID: id, Method: method, Params: params, SessionID: session})
	if err != nil {
		return err
	}
	if _, err := b.in.Write(append(msg, 0)); err != nil {
		return fmt.Errorf("chromium %s: %w", method, err)
	}
	for {
		m, err := b.read(deadline)
		if err != nil {
			return fmt.Errorf("chromium %s: %w", method, err)
		}
		if m.ID != id {
			if m.Method != "" && seen != nil {
				seen(m)
			}
			continue
		}
		if m.Error != nil {
			return fmt.Errorf("chromium %s: %s", method, m.Error.Message)
		}
		if result != nil {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	}
}

func (b *browser) read(deadline time.Time) (message, error) {
	var m message
	if err := b.out.SetReadDeadline(deadline); err != nil {
		return m, err
	}
	line, err := b.r.ReadBytes(0)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return m, errors.New("no answer within 2 minutes")
		}
		return m, fmt.Errorf("%w\n%s", err, b.stderrTail())
	}
	return m, json.Unmarshal(bytes.TrimSuffix(line, []byte{0}), &m)
}

// page is what open gives an operation: a loaded page in a window of its
// own.
type page struct {
	b        *browser
	session  string
	deadline time.Time
}

func (p *page) call(method string, params, result any) error {
	return p.b.call(p.session, method, params, result, nil, p.deadline)
}

// frame is the height of the browser's frame in a window of headless
// Chromium started with --window-size (156: 768 leaves 625 to the page).
const frame = 143

// open loads url in a new w x h window (as --window-size makes the
// first: the page's viewport is the window less the browser's frame),
// with scroll bars hidden or not, runs f on the loaded page, and closes
// the window.
func open(t testing.TB, url string, w, h int, hideScrollbars bool, f func(p *page) error) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	b := get(t)
	deadline := time.Now().Add(2 * time.Minute)
	var target struct{ TargetID string }
	if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank", "newWindow": true, "width": w, "height": h}, &target, nil, deadline); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.call("", "Target.closeTarget", map[string]any{"targetId": target.TargetID}, nil, nil, deadline); err != nil {
			t.Error(err)
		}
	}()
	var att struct{ SessionID string }
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att, nil, deadline); err != nil {
		t.Fatal(err)
	}
	p := &page{b: b, session: att.SessionID, deadline: deadline}
	if err := p.call("Page.enable", nil, nil); err != nil {
		t.Fatal(err)
	}
	// The viewport --window-size=w,h gives the first window (the page's
	// window less the browser's frame); a window opened later at that size
	// has a frame 56 pixels lower, and a page in it more room.
	if err := p.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": w, "height": h - frame, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		t.Fatal(err)
	}
	if hideScrollbars {
		if err := p.call("Emulation.setScrollbarsHidden", map[string]any{"hidden": true}, nil); err != nil {
			t.Fatal(err)
		}
	}
	loaded := false
	seen := func(m message) {
		if m.SessionID == p.session && m.Method == "Page.loadEventFired" {
			loaded = true
		}
	}
	var nav struct{ ErrorText string }
	if err := b.call(p.session, "Page.navigate", map[string]any{"url": url}, &nav, seen, deadline); err != nil {
		t.Fatal(err)
	}
	if nav.ErrorText != "" {
		t.Fatalf("chromium: %s: %s", url, nav.ErrorText)
	}
	for !loaded {
		m, err := b.read(deadline)
		if err != nil {
			t.Fatalf("chromium: waiting for %s to load: %v", url, err)
		}
		seen(m)
	}
	if err := f(p); err != nil {
		t.Fatal(err)
	}
}

// DOM loads url in headless Chromium and returns its DOM once loaded (as
// --dump-dom prints it: the document element's outer HTML).
func DOM(t testing.TB, url string) string {
	t.Helper()
	return dom(t, url, 800, 600) // --dump-dom's window
}

// dom is DOM in a w x h window.
func dom(t testing.TB, url string, w, h int) string {
	t.Helper()
	var dom string
	open(t, url, w, h, false, func(p *page) error {
		var r struct {
			Result struct{ Value string }
		}
		err := p.call("Runtime.evaluate", map[string]any{"expression": "document.documentElement.outerHTML", "returnByValue": true}, &r)
		dom = r.Result.Value
		return err
	})
	return dom
}

// shot writes url's rendering in a w x h window, scroll bars hidden, to
// the PNG file png.
func shot(t testing.TB, url, png string, w, h int) {
	t.Helper()
	open(t, url, w, h, true, func(p *page) error {
		var r struct{ Data string }
		if err := p.call("Page.captureScreenshot", map[string]any{"format": "png"}, &r); err != nil {
			return err
		}
		b, err := base64.StdEncoding.DecodeString(r.Data)
		if err != nil {
			return err
		}
		return os.WriteFile(png, b, 0o644)
	})
}
