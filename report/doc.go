// Package report is `resolverd report`: the headline fleet analytics for
// a terminal (WriteText) or as one self-contained HTML page (WriteHTML):
// the fleet overview, the MCP server matrix of each deployment and, for a
// session, the incident timeline.
//
// Its numbers are the Grafana dashboards': Collect runs the queries of
// package analytics with the dashboards' variables set from Options
// (Options.Params), so a report is a dashboard state printed. The HTML
// page has no script, font, image or other resource to fetch: styles are
// inline, charts are inline SVG, and its Content-Security-Policy refuses
// anything else. Every number in it carries its query, column and exact
// value as attributes (data-q, data-col, data-v), which the browser test
// compares with the queries' results.
package report
