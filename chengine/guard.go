package chengine

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// guard sits in front of the engine's native port (Options.Guard) and
// keeps away the connections that would make the engine abort (package
// doc, "Why the engine aborts"): it reads each connection's first packet
// and forwards the connection only when that is a ClickHouse Hello whose
// user and password the engine accepts, which it asks the engine's HTTP
// interface (a failed HTTP login is an answer there, not an abort). It
// answers anything else itself with a native-protocol exception, as the
// engine would before it aborts, and logs why. After the Hello it copies
// bytes both ways; when the client's side ends, even by a reset, it ends
// the engine's side with a FIN and reads the engine's side to its end, so
// the engine never sees the reset that aborts it between queries.
type guard struct {
	ln       net.Listener
	engine   string // the engine's own native address
	httpAddr string // the engine's HTTP interface, to check logins
	log      *slog.Logger
	client   *http.Client
	hellos   chan struct{} // bounds connections still in their Hello

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{} // nil once closed

	logMu    sync.Mutex
	lastLog  map[string]time.Time // by refusal: when one was last logged
	unlogged map[string]int       // by refusal: how many since, not logged
}

const (
	// helloTimeout bounds the wait for a connection's Hello: a client
	// sends it at once.
	helloTimeout = 10 * time.Second
	// maxHello bounds a Hello: names and a password, a few hundred bytes.
	maxHello = 64 << 10
	// maxHellos bounds the connections in their Hello at once; more wait
	// in the listen backlog.
	maxHellos = 64
	// drainTimeout bounds the reading of the engine's side of a
	// connection whose client is gone (the rest of an answer).
	drainTimeout = time.Minute
)

// startGuard listens at addr and serves until close.
func startGuard(addr, engine, httpAddr string, log *slog.Logger) (*guard, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	g := &guard{
		ln: ln, engine: engine, httpAddr: httpAddr, log: log,
		client: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConns: 2, IdleConnTimeout: 10 * time.Second}},
		hellos: make(chan struct{}, maxHellos),
		conns:  map[net.Conn]struct{}{},

		lastLog: map[string]time.Time{}, unlogged: map[string]int{},
	}
	g.wg.Add(1)
	go g.accept()
	return g, nil
}

func (g *guard) accept() {
	defer g.wg.Done()
	for {
		c, err := g.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like
			continue
		}
		if !g.track(c, true) {
			c.Close()
			return
		}
		g.hellos <- struct{}{}
		g.wg.Add(1)
		go g.serve(c)
	}
}

// track adds or removes c; false once the guard is closed.
func (g *guard) track(c net.Conn, add bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns == nil {
		return false
	}
	if add {
		g.conns[c] = struct{}{}
	} else {
		delete(g.conns, c)
	}
	return true
}

// close stops listening, closes every connection and waits for their
// goroutines.
func (g *guard) close() {
	g.ln.Close()
	g.mu.Lock()
	conns := g.conns
	g.conns = nil
	g.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	g.wg.Wait()
	g.client.CloseIdleConnections()
}

func (g *guard) serve(c net.Conn) {
	defer g.wg.Done()
	defer func() { c.Close(); g.track(c, false) }()
	hello, h, err := readHello(c)
	<-g.hellos
	if err != nil {
		var r *refusal
		if errors.As(err, &r) {
			g.refuse(c, r)
		}
		return // a client gone or silent: nothing reached the engine
	}
	if r := g.checkLogin(h); r != nil {
		g.refuse(c, r)
		return
	}
	up, err := net.DialTimeout("tcp", g.engine, 5*time.Second)
	if err != nil {
		return // the engine is down: the client sees a closed connection and retries
	}
	if !g.track(up, true) {
		up.Close()
		return
	}
	defer func() { up.Close(); g.track(up, false) }()
	c.SetReadDeadline(time.Time{})
	if _, err := up.Write(hello); err != nil {
		return
	}
	relay(c, up.(*net.TCPConn))
}

// relay copies between the client c and the engine's connection up until
// both sides are done. The client's end (EOF, or a reset) becomes a FIN
// to the engine; the engine's answer is read to its end even when the
// client cannot take it, so the engine's socket is never reset.
func relay(c net.Conn, up *net.TCPConn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := io.Copy(c, up); err != nil {
			// The client is gone: read the rest of the answer.
			up.SetReadDeadline(time.Now().Add(drainTimeout))
			io.Copy(io.Discard, up)
		}
		// The engine closed its side: so does the client's.
		c.Close()
	}()
	io.Copy(up, c)
	up.CloseWrite()
	<-done
}

// refusal is a connection the guard answers itself: code and message of
// the exception it sends, and what it logs.
type refusal struct {
	code    int32
	message string
	log     string
	attrs   []any
}

func (r *refusal) Error() string { return r.message }

// refuse sends r as a native-protocol exception and logs it, at most one
// line a second for each kind of refusal (the others counted in the next
// line).
func (g *guard) refuse(c net.Conn, r *refusal) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	c.Write(exceptionPacket(r.code, r.message))
	// Closed with unread bytes, the connection would be reset and the
	// client could lose the answer: end it with a FIN and read a little.
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
		c.SetReadDeadline(time.Now().Add(time.Second))
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	}
	g.logMu.Lock()
	now := time.Now()
	if now.Sub(g.lastLog[r.log]) < time.Second {
		g.unlogged[r.log]++
		g.logMu.Unlock()
		return
	}
	g.lastLog[r.log] = now
	n := g.unlogged[r.log]
	delete(g.unlogged, r.log)
	g.logMu.Unlock()
	attrs := append([]any{"from", c.RemoteAddr().String()}, r.attrs...)
	if n > 0 {
		attrs = append(attrs, "also_refused_since_last_line", n)
	}
	g.log.Warn("chengine: guard: "+r.log, attrs...)
}

// hello is what the guard reads of a client's Hello.
type hello struct {
	client, database, user, password string
}

// readHello reads c's first packet, bounded in size and time: the bytes
// read (to forward) and the Hello, or a *refusal when it is not a Hello
// the engine could take, or another error when the client went away.
func readHello(c net.Conn) ([]byte, hello, error) {
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	rec := &recorder{r: io.LimitReader(c, maxHello)}
	br := bufio.NewReaderSize(rec, 512)
	var h hello
	first, err := br.Peek(1)
	if err != nil {
		return nil, h, err
	}
	switch first[0] {
	case 0: // Hello
	case 0x16: // a TLS handshake record: a client with TLS on
		return nil, h, &refusal{code: 101, log: "refused a TLS ClientHello: the engine's native port is plain TCP (the client has TLS on: turn it off for this engine)",
			message: "the embedded engine's native port is plain TCP, and this client sent a TLS ClientHello: turn TLS off for it"}
	case 'G', 'P', 'H': // GET, POST, HEAD: HTTP
		return nil, h, &refusal{code: 101, log: "refused an HTTP request on the engine's native port",
			message: "this is the native protocol port, not the HTTP interface"}
	default:
		return nil, h, &refusal{code: 101, log: "refused a connection whose first byte is not a ClickHouse Hello", attrs: []any{"first_byte", fmt.Sprintf("%#02x", first[0])},
			message: "unexpected packet from client: not a Hello"}
	}
	br.ReadByte()
	bad := func(err error) ([]byte, hello, error) {
		if errors.Is(err, errTooLarge) || errors.Is(err, io.EOF) && rec.n >= maxHello {
			return nil, h, &refusal{code: 101, log: "refused a Hello larger than the guard takes", attrs: []any{"limit", maxHello},
				message: "Hello packet too large"}
		}
		return nil, h, err
	}
	if h.client, err = readString(br); err != nil {
		return bad(err)
	}
	for range 3 { // version major, minor, protocol revision
		if _, err := binary.ReadUvarint(br); err != nil {
			return bad(err)
		}
	}
	for _, s := range []*string{&h.database, &h.user, &h.password} {
		if *s, err = readString(br); err != nil {
			return bad(err)
		}
	}
	// Every byte read goes to the engine, any the client sent after its
	// Hello included.
	return rec.buf, h, nil
}

// errTooLarge is a string longer than a whole Hello may be.
var errTooLarge = errors.New("too large")

// readString reads a native-protocol string: a uvarint length, the bytes.
func readString(br *bufio.Reader) (string, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return "", err
	}
	if n > maxHello {
		return "", errTooLarge
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// recorder keeps the bytes read through it.
type recorder struct {
	r   io.Reader
	buf []byte
	n   int
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	r.n += n
	return n, err
}

// checkLogin returns a refusal when the engine would refuse h's login or
// its database, which makes it abort; nil when it accepts them. It asks
// the engine's HTTP interface with the same user, password and database. Markers of other
// authentications (interserver secret, SSH keys, JWT) are refused: the
// guard cannot check them.
func (g *guard) checkLogin(h hello) *refusal {
	switch {
	case h.user == "":
		return &refusal{code: 101, log: "refused a Hello without a user", message: "unexpected packet from client (no user in Hello package)"}
	case strings.HasPrefix(h.user, " ") || strings.HasPrefix(h.password, " "):
		// " INTERSERVER SECRET ", " SSH KEY AUTHENTICATION ", ...
		return &refusal{code: 516, log: "refused a login by a marker it cannot check (interserver secret, SSH key, JWT)", attrs: []any{"user", h.user},
			message: "the embedded engine's guard takes password logins only"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q := url.Values{"query": {"SELECT 1"}}
	if h.database != "" {
		q.Set("database", h.database) // an unknown database aborts the engine too
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+g.httpAddr+"/?"+q.Encode(), nil)
	if err != nil {
		return &refusal{code: 210, message: err.Error(), log: "cannot check a login", attrs: []any{"err", err}}
	}
	req.Header.Set("X-ClickHouse-User", h.user)
	req.Header.Set("X-ClickHouse-Key", h.password)
	resp, err := g.client.Do(req)
	if err != nil {
		// The engine is down or restarting: the client retries.
		return &refusal{code: 210, message: "the engine is not answering: " + err.Error(), log: "cannot check a login: the engine's HTTP interface does not answer", attrs: []any{"err", err}}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	code, _ := strconv.Atoi(resp.Header.Get("X-ClickHouse-Exception-Code"))
	msg := strings.TrimSpace(string(body))
	if code == 0 {
		code = 516
	}
	return &refusal{code: int32(code), message: msg, log: "refused a native login the engine does not accept (it would abort on it)",
		attrs: []any{"user", h.user, "database", h.database, "client", h.client, "engine_says", msg}}
}

// exceptionPacket is a native-protocol Exception (server packet 2): code
// (Int32), name, message, stack trace, has_nested (UInt8).
func exceptionPacket(code int32, message string) []byte {
	b := []byte{2}
	b = binary.LittleEndian.AppendUint32(b, uint32(code))
	for _, s := range []string{"DB::Exception", message, ""} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return append(b, 0)
}
