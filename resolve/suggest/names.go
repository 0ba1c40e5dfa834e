package suggest

import (
	"math/bits"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNames is the most names a hint lists.
const MaxNames = 3

// maxName is the longest name (in bytes) that is compared at all: no
// registry names a tool this long, and the comparison's cost grows with
// the length.
const maxName = 256

// name is one normalised name with the summary that prunes comparisons.
type name struct {
	key    string // normalised
	mask   uint64 // bit i: counts[i] > 0
	counts counts // of the characters of key
}

func newName(s string) name {
	k := normalize(s)
	n := name{key: k, counts: countChars(k)}
	for i, c := range n.counts {
		if c > 0 {
			n.mask |= 1 << i
		}
	}
	return n
}

// far reports whether the names are certainly more than k edits apart,
// from their summaries: the characters present first (one instruction;
// an edit adds or removes at most one of them each way), then the counts.
func far(a, b *name, k int) bool {
	return bits.OnesCount64(a.mask&^b.mask) > k || bits.OnesCount64(b.mask&^a.mask) > k ||
		lowerBound(a, b) > k
}

// prefixes are dropped from emitted names: the forms models and hosts
// wrap tool names in.
var prefixes = []string{"functions.", "default_api.", "mcp__", "mcp_"}

// normalize folds case, drops separators and makes each word singular, so
// that the spellings a model varies on compare equal.
func normalize(s string) string {
	if len(s) > maxName {
		s = s[:maxName]
	}
	b := make([]byte, 0, len(s))
	start := 0 // of the current word in b
	var prev rune
	flush := func() {
		b = b[:start+singular(b[start:])]
		start = len(b)
	}
	for _, r := range s {
		switch {
		case r == '_' || r == '-' || r == '.' || r == '/' || r == ' ' || r == ':':
			flush()
		case unicode.IsUpper(r):
			if unicode.IsLower(prev) || unicode.IsDigit(prev) {
				flush() // camelCase boundary
			}
			b = utf8.AppendRune(b, unicode.ToLower(r))
		default:
			b = utf8.AppendRune(b, r)
		}
		prev = r
	}
	flush()
	return string(b)
}

// singular returns the length of word w without its plural ending: "ses",
// "xes", "ches", "shes" and "ies" lose "es" (both sides of a comparison
// are normalised alike, so "ies" need not become "y"), other words ending
// in one "s" lose it. Words of three letters or fewer keep theirs ("gas").
func singular(w []byte) int {
	n := len(w)
	if n <= 3 || w[n-1] != 's' || w[n-2] == 's' {
		return n
	}
	for _, suf := range []string{"ies", "ses", "xes", "ches", "shes"} {
		if n > len(suf) && string(w[n-len(suf):]) == suf {
			return n - 2
		}
	}
	return n - 1
}

// counts are how often each character occurs in a name: ASCII letters
// and digits one slot each, the rest hashed onto the last four. An
// insertion or a deletion changes one count by one, a substitution two
// (one up, one down), a transposition none; so the distance of two names
// is at least the larger of the sums of their counts' positive and
// negative differences (lowerBound), which rules out most names of a
// registry without computing any distance.
type counts [40]uint8

func countChars(s string) counts {
	var c counts
	for _, r := range s {
		i := 36 + int(uint(r)%4)
		switch {
		case r >= 'a' && r <= 'z':
			i = int(r - 'a')
		case r >= '0' && r <= '9':
			i = 26 + int(r-'0')
		}
		if c[i] < 255 {
			c[i]++
		}
	}
	return c
}

// lowerBound is a lower bound of the edit distance of two names, from
// their character counts (visiting only the characters either has).
func lowerBound(a, b *name) int {
	pos, neg := 0, 0
	for m := a.mask | b.mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		d := int(a.counts[i]) - int(b.counts[i])
		if d > 0 {
			pos += d
		} else {
			neg -= d
		}
	}
	return max(pos, neg)
}

// maxDistance is how far a normalised name of n bytes may be from a
// valid one and still be suggested.
func maxDistance(n int) int { return max(1, min(2, n/4)) }

// within reports whether the edit distance of a and b is at most k, and
// the distance. The distance counts insertions, deletions, substitutions
// and transpositions of adjacent characters (the optimal string
// alignment distance: "titel" is one edit from "title"). It computes
// only a band of 2k+1 cells per row and stops as soon as a whole row
// exceeds k: O(max(len) * k). buf holds at least 3*(min(len)+1) ints.
func within(a, b string, k int, buf []int) (int, bool) {
	if len(a) < len(b) {
		a, b = b, a
	}
	m, n := len(a), len(b)
	if m-n > k {
		return 0, false
	}
	big := k + 1
	prev2, prev, cur := buf[:n+1], buf[n+1:2*(n+1)], buf[2*(n+1):3*(n+1)]
	for j := range prev {
		prev[j] = min(j, big)
	}
	for i := 1; i <= m; i++ {
		lo, hi := max(0, i-k), min(n, i+k)
		if lo > 0 {
			cur[lo-1] = big // left of the band
		}
		best := big
		for j := lo; j <= hi; j++ {
			c := min(i, big)
			if j > 0 {
				c = prev[j-1]
				if a[i-1] != b[j-1] {
					c++
				}
				c = min(c, prev[j]+1, cur[j-1]+1)
				if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
					c = min(c, prev2[j-2]+1)
				}
				c = min(c, big)
			}
			cur[j] = c
			best = min(best, c)
		}
		if hi < n {
			cur[hi+1] = big // right of the band: the next row reads it
		}
		if best > k {
			return 0, false
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[n], prev[n] <= k
}

// candidate is one valid name of a version.
type candidate struct {
	name
	server string
	tool   string
	shared bool // several servers provide tool: unpinned it is M2 or M3
}

// nameIndex is a version's names sorted by the length of their
// normalised form, for the length window of a query.
type nameIndex struct {
	cands  []candidate
	masks  []uint64 // cands[i].mask: the first filter scans only these
	starts []int    // cands[starts[l]:starts[l+1]] have normalised length l
	byNorm map[string]string
	single bool
	maxLen int
}

// ofLength returns the range of cands whose normalised length is l.
func (x *nameIndex) ofLength(l int) (lo, hi int) {
	if l < 0 || l >= len(x.starts)-1 {
		return 0, 0
	}
	return x.starts[l], x.starts[l+1]
}

// match is a candidate at a distance.
type match struct {
	c         *candidate
	d         int
	preferred bool // on the server the query named or pinned
}

// query is an emitted name as the index compares it.
type query struct {
	name
	server string // a connected server the name was pinned or prefixed to
}

// parseQuery normalises an emitted name against x: it drops the wrapping
// prefixes and a connected server's prefix, which becomes the preferred
// server.
func (x *nameIndex) parseQuery(tool, pin string) query {
	s := tool
	for changed := true; changed; {
		changed = false
		for _, p := range prefixes {
			if len(s) > len(p) && strings.EqualFold(s[:len(p)], p) {
				s, changed = s[len(p):], true
			}
		}
	}
	q := query{server: pin}
	for _, sep := range []string{"__", "/", "."} {
		if i := strings.Index(s, sep); i > 0 && i+len(sep) < len(s) {
			if srv, ok := x.byNorm[normalize(s[:i])]; ok {
				s, q.server = s[i+len(sep):], srv
				break
			}
		}
	}
	q.name = newName(s)
	return q
}

// unprefixed returns the query of the name after its last "__", when the
// name has one whose prefix is not a connected server (parseQuery drops
// a connected server's prefix itself).
func (x *nameIndex) unprefixed(tool string) (query, bool) {
	i := strings.LastIndex(tool, "__")
	if i <= 0 || i+2 == len(tool) {
		return query{}, false
	}
	if _, ok := x.byNorm[normalize(tool[:i])]; ok {
		return query{}, false
	}
	return query{name: newName(tool[i+2:])}, true
}

// merge returns the nearest of two searches' matches, at most MaxNames,
// without repeating a candidate.
func merge(a, b []match) []match {
	out := slices.Clone(a)
	for _, m := range b {
		if !slices.ContainsFunc(out, func(o match) bool { return o.c == m.c }) {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, compareMatch)
	if len(out) > 0 {
		worst := out[0].d + 1
		for len(out) > 0 && out[len(out)-1].d > worst {
			out = out[:len(out)-1]
		}
	}
	return out[:min(len(out), MaxNames)]
}

// nearest returns up to MaxNames candidates nearest to q, nearest first;
// preferred servers first among equals, then by name. Only candidates
// within one edit of the nearest are kept: next to a near miss, a name
// two edits further is noise. Lengths are scanned from the query's
// outwards, since two names are at least their difference in length
// apart: once a close match is found, the lengths beyond it are skipped.
func (x *nameIndex) nearest(q query) []match {
	n := len(q.key)
	if n == 0 || n > x.maxLen+4 {
		return nil
	}
	k := maxDistance(n)
	var best []match
	worst := k // the distance a candidate must not exceed to enter best
	var small [3 * 40]int
	row := small[:]
	if need := 3 * (n + k + 1); need > len(row) {
		row = make([]int, need)
	}
	for delta := 0; delta <= worst; delta++ {
		for _, l := range [2]int{n - delta, n + delta} {
			lo, hi := x.ofLength(l)
			for i, m := range x.masks[lo:hi] {
				if bits.OnesCount64(m&^q.mask) > worst || bits.OnesCount64(q.mask&^m) > worst {
					continue
				}
				c := &x.cands[lo+i]
				if lowerBound(&c.name, &q.name) > worst {
					continue
				}
				d, ok := within(q.key, c.key, worst, row)
				if !ok {
					continue
				}
				best = append(best, match{c: c, d: d, preferred: q.server != "" && c.server == q.server})
				slices.SortStableFunc(best, compareMatch)
				worst = min(worst, best[0].d+1)
				for len(best) > 0 && best[len(best)-1].d > worst {
					best = best[:len(best)-1]
				}
				if len(best) > MaxNames {
					best = best[:MaxNames]
				}
				if len(best) == MaxNames {
					worst = best[MaxNames-1].d
				}
			}
			if delta == 0 {
				break
			}
		}
	}
	return best
}

func compareMatch(a, b match) int {
	if a.d != b.d {
		return a.d - b.d
	}
	if a.preferred != b.preferred {
		if a.preferred {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.c.tool, b.c.tool); c != 0 {
		return c
	}
	return strings.Compare(a.c.server, b.c.server)
}

// display is how a hint names candidate c for a caller that pinned pin:
// the plain name where it resolves unpinned (or on the pinned server),
// else server__tool.
func display(c *candidate, pin string, single bool) string {
	if single || c.server == "" {
		return c.tool
	}
	if pin != "" {
		if c.server == pin {
			return c.tool
		}
		return c.server + "__" + c.tool
	}
	if c.shared {
		return c.server + "__" + c.tool
	}
	return c.tool
}

// names turns matches into distinct display names, at most MaxNames.
func names(ms []match, pin string, single bool) []string {
	var out []string
	for _, m := range ms {
		s := display(m.c, pin, single)
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
		if len(out) == MaxNames {
			break
		}
	}
	return out
}

// nearestKeys returns up to MaxNames of keys (with their normalised
// forms) nearest to key, nearest first, by the same rules as names;
// skip tells keys not to list.
func nearestKeys(key string, keys []string, forms []name, skip func(string) bool) []string {
	q := newName(key)
	n := len(q.key)
	if n == 0 || len(key) > maxName {
		return nil
	}
	k := maxDistance(n)
	type km struct {
		k string
		d int
	}
	var best []km
	row := make([]int, 3*(n+k+1))
	for i := range forms {
		cn := &forms[i]
		c := keys[i]
		if c == key || len(cn.key) > maxName || abs(len(cn.key)-n) > k || far(cn, &q, k) || skip(c) {
			continue
		}
		if d, ok := within(q.key, cn.key, k, row); ok {
			best = append(best, km{c, d})
		}
	}
	slices.SortStableFunc(best, func(a, b km) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.k, b.k)
	})
	var out []string
	for _, b := range best[:min(len(best), MaxNames)] {
		out = append(out, b.k)
	}
	return out
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
