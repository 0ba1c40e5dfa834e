// Package report is `resolverd report`: the fleet analytics for a
// terminal (WriteText) or as one self-contained HTML page (WriteHTML),
// leading with the answer: the headline rates and their change against
// the period before, and the top problems ranked by the calls they
// affected (fabricated names, colliding and shadowed names, drifting
// servers, sessions with most rejections), each linking to its section;
// then those sections cut to their top rows with a count of the rest, the
// rate over time in buckets chosen from the range, and, for a session,
// the incident timeline.
//
// Its numbers are the Grafana dashboards': Collect runs the queries of
// package analytics with the dashboards' variables set from Options
// (Options.Params), a fixed number of them, each over every selected
// registry at once (a report over thousands of registries runs the
// queries one over ten runs). The HTML page has no script, font, image
// or other resource to fetch: styles are inline, charts are inline SVG,
// and its Content-Security-Policy (CSP) refuses anything else. Every
// number in it carries its query, column and exact value as attributes
// (data-q, data-col, data-v), which the browser test compares with the
// queries' results.
package report
