package htb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Report is the result of a run: the JSON output, and the source of the
// markdown tables.
type Report struct {
	Benchmark      string        `json:"benchmark"`
	Version        int           `json:"version"`
	Seed           uint64        `json:"seed"`
	TrialsPerClass int           `json:"trials_per_class"`
	HonestPerKind  int           `json:"honest_per_kind"`
	Score          string        `json:"score"`
	Tracks         []TrackResult `json:"tracks"`
}

// TrackResult holds one track's numbers.
type TrackResult struct {
	Name      string           `json:"name"`
	Title     string           `json:"title"`
	Classes   []string         `json:"classes"`
	Trials    map[string]int   `json:"trials"`
	Notes     []string         `json:"notes,omitempty"`
	Pipelines []PipelineResult `json:"pipelines"`
	// Agreement compares the strict resolver's class with the trial's
	// label under the contract's rules: a check of the generator and of the
	// resolver, not a score.
	Agreement Agreement `json:"resolver_label_agreement"`
}

// PipelineResult holds one pipeline's numbers on one track.
type PipelineResult struct {
	Name              string             `json:"name"`
	ASR               map[string]float64 `json:"asr"`
	Executed          map[string]int     `json:"executed"`
	MeanASR           *float64           `json:"mean_asr,omitempty"`
	HonestRejected    int                `json:"honest_rejected"`
	HonestMisrouted   int                `json:"honest_misrouted"`
	OverRejection     float64            `json:"honest_over_rejection"`
	FlatOverRejection *float64           `json:"flat_over_rejection,omitempty"`
	// ShadowExecuted counts M3 trials executed on a provider of lower trust
	// than the name's top provider (the shadow itself).
	ShadowExecuted *int            `json:"m3_executed_on_shadow,omitempty"`
	HTB            *float64        `json:"htb,omitempty"`
	Variants       []VariantResult `json:"variants"`
}

// VariantResult counts one variant of one class.
type VariantResult struct {
	Kind     string `json:"kind"`
	Variant  string `json:"variant"`
	Trials   int    `json:"trials"`
	Executed int    `json:"executed"`
}

// Agreement counts trials whose strict-resolver class equals the label.
type Agreement struct {
	Agree         int            `json:"agree"`
	Total         int            `json:"total"`
	Disagreements []Disagreement `json:"disagreements,omitempty"`
}

// Disagreement is one trial the strict resolver classed differently.
type Disagreement struct {
	Trial    string `json:"trial"`
	Expected string `json:"expected"`
	Got      string `json:"got"`
	Reason   string `json:"reason"`
}

// JSON renders the report, indented, with a final newline.
func (r *Report) JSON() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func f4(f float64) string { return fmt.Sprintf("%.4f", f) }

// Markdown renders the report as markdown tables, one per track.
func (r *Report) Markdown() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Hallucinated-Tools Benchmark\n\n")
	fmt.Fprintf(&b, "seed %d · hostile trials per class %d · honest trials per kind %d\n\n", r.Seed, r.TrialsPerClass, r.HonestPerKind)
	fmt.Fprintf(&b, "ASR: share of hostile calls executed. Over-rejection: share of honest calls not executed. %s.\n", r.Score)
	for _, t := range r.Tracks {
		fmt.Fprintf(&b, "\n## %s: %s\n\n", t.Name, t.Title)
		var counts []string
		for _, cl := range t.Classes {
			counts = append(counts, fmt.Sprintf("%s %d", cl, t.Trials[cl]))
		}
		counts = append(counts, fmt.Sprintf("honest %d", t.Trials[Honest]))
		flat := ""
		for _, k := range sortedKeys(t.Trials) {
			if strings.HasPrefix(k, Honest+"/") {
				flat = strings.TrimPrefix(k, Honest+"/")
				counts = append(counts, fmt.Sprintf("(of which %s %d)", flat, t.Trials[k]))
			}
		}
		fmt.Fprintf(&b, "trials: %s\n\n", strings.Join(counts, " · "))
		head := []string{"pipeline"}
		head = append(head, t.Classes...)
		head = append(head, "honest over-rej.")
		if flat != "" {
			head = append(head, flat+" over-rej.")
		}
		if len(t.Classes) > 0 {
			head = append(head, "HTB")
		} else {
			head = append(head, "rejected", "misrouted")
		}
		fmt.Fprintf(&b, "| %s |\n|---|%s\n", strings.Join(head, " | "), strings.Repeat("---:|", len(head)-1))
		for _, p := range t.Pipelines {
			row := []string{p.Name}
			for _, cl := range t.Classes {
				if a, ok := p.ASR[cl]; ok {
					row = append(row, f4(a))
				} else {
					row = append(row, "n/a")
				}
			}
			row = append(row, f4(p.OverRejection))
			if p.FlatOverRejection != nil {
				row = append(row, f4(*p.FlatOverRejection))
			}
			if p.HTB != nil {
				row = append(row, f4(*p.HTB))
			} else {
				row = append(row, fmt.Sprint(p.HonestRejected), fmt.Sprint(p.HonestMisrouted))
			}
			fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
		}
		b.WriteString("\n")
		for _, n := range t.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		fmt.Fprintf(&b, "- strict resolver agrees with the contract label on %d of %d trials\n", t.Agreement.Agree, t.Agreement.Total)
	}
	return []byte(b.String())
}
