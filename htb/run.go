package htb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// Defaults of Config.
const (
	DefaultTrials = 400
	DefaultHonest = 400
	DefaultCorpus = "testdata/corpus"
)

// Config of a benchmark run.
type Config struct {
	Seed   uint64
	Tracks []string // track names (see ParseTracks)
	Trials int      // hostile trials per class (default DefaultTrials)
	Honest int      // honest trials per honest kind (default DefaultHonest)
	Corpus string   // the corpus directory (mcp/, bfcl/) for the real tracks
}

// ParseTracks expands a --track value: single, mcp, real (real-mcp,
// apibank, bfcl), all, or one of the real tracks by name.
func ParseTracks(s string) ([]string, error) {
	switch s {
	case "single":
		return []string{TrackSingle}, nil
	case "mcp":
		return []string{TrackMCP}, nil
	case "real":
		return []string{TrackRealMCP, TrackAPIBank, TrackBFCL}, nil
	case "all", "":
		return []string{TrackSingle, TrackMCP, TrackRealMCP, TrackAPIBank, TrackBFCL}, nil
	case TrackRealMCP, TrackAPIBank, TrackBFCL:
		return []string{s}, nil
	}
	return nil, fmt.Errorf("unknown track %q (want single, mcp, real, all, real-mcp, apibank or bfcl)", s)
}

// ErrNoCorpus is returned when a real track needs the corpus and it is not
// there.
var ErrNoCorpus = errors.New("corpus not found")

func (c *Config) defaults() {
	if c.Trials <= 0 {
		c.Trials = DefaultTrials
	}
	if c.Honest <= 0 {
		c.Honest = DefaultHonest
	}
	if c.Corpus == "" {
		c.Corpus = DefaultCorpus
	}
	if len(c.Tracks) == 0 {
		c.Tracks, _ = ParseTracks("all")
	}
}

// Build generates the tracks of a run.
func Build(cfg Config) ([]*Track, error) {
	cfg.defaults()
	var out []*Track
	for _, name := range cfg.Tracks {
		if name == TrackRealMCP || name == TrackBFCL {
			if _, err := os.Stat(filepath.Join(cfg.Corpus, "mcp", "listings.jsonl")); err != nil {
				return nil, fmt.Errorf("%w at %s: run from the repository root or pass --corpus DIR (tracks single, mcp and apibank need no corpus)", ErrNoCorpus, cfg.Corpus)
			}
		}
		var t *Track
		var err error
		switch name {
		case TrackSingle:
			t, err = singleTrack(cfg.Seed, cfg.Trials, cfg.Honest)
		case TrackMCP:
			t, err = mcpTrack(cfg.Seed, cfg.Trials, cfg.Honest)
		case TrackRealMCP:
			t, err = realMCPTrack(cfg.Corpus, cfg.Seed, cfg.Trials, cfg.Honest)
		case TrackAPIBank:
			t, err = apiBankTrack(cfg.Seed, cfg.Trials, cfg.Honest)
		case TrackBFCL:
			t, err = bfclTrack(cfg.Corpus)
		default:
			err = fmt.Errorf("unknown track %q", name)
		}
		if err != nil {
			return nil, fmt.Errorf("track %s: %w", name, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Run builds the tracks and scores every pipeline on them.
func Run(cfg Config) (*Report, error) {
	cfg.defaults()
	tracks, err := Build(cfg)
	if err != nil {
		return nil, err
	}
	r := &Report{Benchmark: "htb", Version: 1, Seed: cfg.Seed, TrialsPerClass: cfg.Trials, HonestPerKind: cfg.Honest, Score: ScoreFormula}
	for _, t := range tracks {
		tr, err := Score(t, Pipelines())
		if err != nil {
			return nil, err
		}
		r.Tracks = append(r.Tracks, tr)
	}
	return r, nil
}

// Outcomes runs every trial of a track through the pipelines and calls
// visit with each outcome, in trial order then pipeline order.
func Outcomes(t *Track, ps []Pipeline, visit func(tr *Trial, c *schema.Call, p int, o Outcome)) error {
	env := newEnv(t.w)
	var dec schema.CallDecoder
	var c schema.Call
	for i := range t.Trials {
		tr := &t.Trials[i]
		if err := dec.Decode(tr.Line, &c); err != nil {
			return fmt.Errorf("trial %s: %w", tr.ID, err)
		}
		for j, p := range ps {
			visit(tr, &c, j, p.Decide(env, &c))
		}
	}
	return nil
}

// Score runs a track and computes its metrics.
func Score(t *Track, ps []Pipeline) (TrackResult, error) {
	res := TrackResult{Name: t.Name, Title: t.Title, Classes: t.Classes, Notes: t.Notes, Trials: map[string]int{}}
	type acc struct {
		exec     map[string]int
		honestOK int
		misroute int
		flatOK   int
		shadow   int
		variants map[[2]string][2]int
	}
	accs := make([]acc, len(ps))
	for i := range accs {
		accs[i] = acc{exec: map[string]int{}, variants: map[[2]string][2]int{}}
	}
	var variantOrder [][2]string
	seenVariant := map[[2]string]bool{}
	strict := resolve.Resolver{Mode: resolve.Strict}
	var d schema.Decision
	env := newEnv(t.w)
	err := Outcomes(t, ps, func(tr *Trial, c *schema.Call, j int, o Outcome) {
		key := [2]string{tr.Kind, tr.Variant}
		if j == 0 {
			res.Trials[tr.Kind]++
			if t.FlatVariant != "" && tr.Kind == Honest && tr.Variant == t.FlatVariant {
				res.Trials[Honest+"/"+t.FlatVariant]++
			}
			if !seenVariant[key] {
				seenVariant[key] = true
				variantOrder = append(variantOrder, key)
			}
			strict.Resolve(env.w.snap, c, &d)
			res.Agreement.Total++
			if d.Class == tr.Expect {
				res.Agreement.Agree++
			} else if len(res.Agreement.Disagreements) < 20 {
				res.Agreement.Disagreements = append(res.Agreement.Disagreements,
					Disagreement{Trial: tr.ID, Expected: string(tr.Expect), Got: string(d.Class), Reason: d.Reason})
			}
		}
		a := &accs[j]
		v := a.variants[key]
		v[0]++
		if o.Executed {
			v[1]++
			a.exec[tr.Kind]++
			if tr.Kind == "M3" && env.onShadow(c, o) {
				a.shadow++
			}
			if tr.Kind == Honest {
				a.honestOK++
				if (Ref{o.Server, o.Tool}) != tr.Intended {
					a.misroute++
				}
				if tr.Variant == t.FlatVariant {
					a.flatOK++
				}
			}
		}
		a.variants[key] = v
	})
	if err != nil {
		return res, err
	}
	nHonest := res.Trials[Honest]
	nFlat := res.Trials[Honest+"/"+t.FlatVariant]
	for j, p := range ps {
		a := accs[j]
		pr := PipelineResult{Name: p.Name(), ASR: map[string]float64{}, Executed: map[string]int{}}
		sum, k := 0.0, 0
		for _, cl := range t.Classes {
			n := res.Trials[cl]
			pr.Executed[cl] = a.exec[cl]
			if n == 0 {
				continue
			}
			asr := float64(a.exec[cl]) / float64(n)
			pr.ASR[cl] = asr
			sum += asr
			k++
		}
		pr.HonestRejected = nHonest - a.honestOK
		pr.HonestMisrouted = a.misroute
		if nHonest > 0 {
			pr.OverRejection = float64(pr.HonestRejected) / float64(nHonest)
		}
		if nFlat > 0 {
			f := float64(nFlat-a.flatOK) / float64(nFlat)
			pr.FlatOverRejection = &f
		}
		if slices.Contains(t.Classes, "M3") {
			sh := a.shadow
			pr.ShadowExecuted = &sh
		}
		if k > 0 {
			mean := sum / float64(k)
			score := (1 - mean) * (1 - pr.OverRejection)
			pr.MeanASR, pr.HTB = &mean, &score
		}
		for _, key := range variantOrder {
			v := a.variants[key]
			pr.Variants = append(pr.Variants, VariantResult{Kind: key[0], Variant: key[1], Trials: v[0], Executed: v[1]})
		}
		res.Pipelines = append(res.Pipelines, pr)
	}
	return res, nil
}

// onShadow reports whether an executed call ran on a provider whose trust
// is below the top trust among the providers of that name.
func (e *Env) onShadow(c *schema.Call, o Outcome) bool {
	v := e.version(c)
	if v == nil {
		return false
	}
	provs := v.Providers(o.Tool)
	top, mine := -1<<31, 1<<30
	for _, p := range provs {
		top = max(top, p.Trust)
		if p.Server == o.Server {
			mine = p.Trust
		}
	}
	return mine < top
}

// ScoreFormula documents the HTB score.
const ScoreFormula = "HTB = (1 - mean ASR over the track's classes) x (1 - honest over-rejection)"
