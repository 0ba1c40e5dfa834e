package approvals

import (
	"bytes"
	"os"
	"testing"
)

// FuzzDecode: any bytes decode to a valid event or an error, never a
// crash; an event decoded encodes to bytes that decode to it again.
func FuzzDecode(f *testing.F) {
	f.Add(ev(Approve, "s", "t", dg("a")).AppendJSON(nil))
	f.Add([]byte(`{"type":"approval","tool":"t","tool":"u"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("decoded an invalid event: %v", err)
		}
		again, err := Decode(e.AppendJSON(nil))
		if err != nil || *again != *e {
			t.Fatalf("re-decoded %+v, %v; want %+v", again, err, e)
		}
	})
}

// FuzzReadLock: any lockfile reads to events that write back a lockfile
// that reads to the same baseline, or an error; never a crash.
func FuzzReadLock(f *testing.F) {
	good, err := os.ReadFile("testdata/lock.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(lockHeader + "\n{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := ReadLock(bytes.NewReader(b))
		if err != nil {
			return
		}
		base, err := LockBaseline(es)
		if err != nil {
			t.Fatalf("events ReadLock returned do not apply: %v", err)
		}
		var w1, w2 bytes.Buffer
		WriteLock(&w1, base)
		es2, err := ReadLock(bytes.NewReader(w1.Bytes()))
		if err != nil {
			t.Fatalf("a written lockfile does not read: %v\n%s", err, w1.Bytes())
		}
		base2, _ := LockBaseline(es2)
		WriteLock(&w2, base2)
		if !bytes.Equal(w1.Bytes(), w2.Bytes()) {
			t.Fatalf("lockfile not stable:\n%s\n%s", w1.Bytes(), w2.Bytes())
		}
	})
}
