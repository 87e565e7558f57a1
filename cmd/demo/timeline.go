package main

import (
	"bufio"
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"time"
)

// spanKind is what a bar on a timeline means.
type spanKind int

const (
	spanWait   spanKind = iota // asked, not granted yet: light bar
	spanHold                   // exclusive hold: dark bar
	spanShared                 // shared hold (a read lock): dark green bar
	spanDown                   // a node that is down: grey bar
)

// tlSpan is one bar.
type tlSpan struct {
	Start, End time.Duration // since the timeline's origin
	Kind       spanKind
	Note       string // tooltip text
}

// tlRow is one row: an owner, or a lane that gathers every owner's holds of
// one lock so that overlaps show.
type tlRow struct {
	Label string
	Lane  bool // drawn shaded; overlapping holds in it are marked red
	Spans []tlSpan
}

// timeline is a picture of waits and holds over time.
type timeline struct {
	Title, Subtitle string
	Total           time.Duration
	Rows            []tlRow
}

// Layout of the page, in pixels.
const (
	tlLabelW    = 170
	tlRowH      = 20
	tlBarH      = 12
	tlTop       = 34 // above the first row: the time axis
	tlMinWidth  = 960
	tlMaxWidth  = 24000
	tlMinHoldPx = 3 // the median hold is drawn at least this wide
)

var kindColor = map[spanKind]string{
	spanWait: "#b9d3f0", spanHold: "#16407a", spanShared: "#1b7f4c", spanDown: "#a0a0a0",
}

// conflictColor marks where an exclusive hold overlaps another hold.
const conflictColor = "#e3121b"

// writeHTML writes tl as a self-contained page: inline SVG and CSS, no
// script, nothing fetched. Labels stay put while the chart scrolls.
func (tl *timeline) writeHTML(w io.Writer) error {
	bw := bufio.NewWriter(w)
	scale := tl.scale() // pixels per second
	width := math.Ceil(tl.Total.Seconds()*scale) + 10
	height := tlTop + len(tl.Rows)*tlRowH + 10
	tl.writeHead(bw)
	fmt.Fprintf(bw, "<div class=chart><svg class=labels width=\"%d\" height=\"%d\">\n", tlLabelW, height)
	for i, r := range tl.Rows {
		y := tlTop + i*tlRowH
		fmt.Fprintf(bw, "<text x=\"6\" y=\"%d\">%s</text>\n", y+tlRowH/2+4, html.EscapeString(r.Label))
	}
	fmt.Fprintf(bw, "</svg><div class=scroll><svg width=\"%.0f\" height=\"%d\">\n", width, height)
	tl.writeAxis(bw, scale, width, height)
	for i, r := range tl.Rows {
		tl.writeRow(bw, r, tlTop+i*tlRowH, scale, width)
	}
	fmt.Fprint(bw, "</svg></div></div>\n</body></html>\n")
	return bw.Flush()
}

// writeHead writes the page up to the chart: style, title, legend and the
// count of overlaps found in the lanes.
func (tl *timeline) writeHead(w io.Writer) {
	conflicts, lanes := 0, 0
	for _, r := range tl.Rows {
		if r.Lane {
			lanes++
			conflicts += len(conflictsOf(r.Spans))
		}
	}
	title := html.EscapeString(tl.Title)
	fmt.Fprintf(w, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>lockactor demo: %s</title>\n", title)
	fmt.Fprint(w, "<style>body{font:13px system-ui,sans-serif;margin:16px;color:#222;background:#fff}"+
		"h1{font-size:18px;margin:0 0 4px}p{margin:4px 0}.chart{display:flex;border:1px solid #ccc}"+
		".labels{flex:none}.scroll{overflow-x:auto}"+
		".key{display:inline-block;width:14px;height:10px;margin:0 4px 0 14px;vertical-align:middle}"+
		"svg text{font:11px system-ui,sans-serif;fill:#333}</style></head><body>\n")
	fmt.Fprintf(w, "<h1>lockactor demo: %s</h1>\n<p>%s</p>\n<p>", title, html.EscapeString(tl.Subtitle))
	for _, k := range []struct {
		kind spanKind
		text string
	}{{spanWait, "waiting"}, {spanHold, "holding (exclusive)"}, {spanShared, "holding (shared)"}, {spanDown, "node down"}} {
		if tl.has(k.kind) {
			fmt.Fprintf(w, "<span class=key style=\"background:%s\"></span>%s", kindColor[k.kind], k.text)
		}
	}
	if lanes > 0 {
		fmt.Fprintf(w, "<span class=key style=\"background:%s\"></span>overlap (two holders at once)", conflictColor)
	}
	fmt.Fprint(w, "</p>\n<p>")
	if lanes > 0 {
		fmt.Fprintf(w, "Overlapping holds found in the shaded lanes: <b>%d</b>. ", conflicts)
	}
	fmt.Fprintf(w, "Time axis: %v in all; hover a bar for details.</p>\n", tl.Total.Round(time.Millisecond))
}

// has reports whether any bar is of kind k.
func (tl *timeline) has(k spanKind) bool {
	for _, r := range tl.Rows {
		for _, s := range r.Spans {
			if s.Kind == k {
				return true
			}
		}
	}
	return false
}

// scale picks pixels per second: the whole run in at least tlMinWidth, the
// median hold at least tlMinHoldPx wide, the page at most tlMaxWidth.
func (tl *timeline) scale() float64 {
	total := max(tl.Total.Seconds(), 1e-3)
	var holds []time.Duration
	for _, r := range tl.Rows {
		for _, s := range r.Spans {
			if !r.Lane && (s.Kind == spanHold || s.Kind == spanShared) {
				holds = append(holds, s.End-s.Start)
			}
		}
	}
	scale := tlMinWidth / total
	if len(holds) > 0 {
		slices.Sort(holds)
		if med := holds[len(holds)/2].Seconds(); med > 0 {
			scale = max(scale, tlMinHoldPx/med)
		}
	}
	return min(scale, tlMaxWidth/total)
}

// writeAxis draws the time ticks and grid lines.
func (tl *timeline) writeAxis(w io.Writer, scale, width float64, height int) {
	step := tickStep(80 / scale) // at least 80 px between ticks
	for t := 0.0; t*scale <= width; t += step {
		x := t * scale
		fmt.Fprintf(w, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e4e4e4\"/>", x, tlTop-6, x, height)
		if x+50 < width { // no label cut off at the right edge
			fmt.Fprintf(w, "<text x=\"%.1f\" y=\"%d\">%s</text>\n", x+2, tlTop-10, time.Duration(t*float64(time.Second)).Round(time.Microsecond))
		}
	}
}

// tickStep rounds min up to 1, 2 or 5 times a power of ten.
func tickStep(min float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(min)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= min {
			return m * p
		}
	}
	return 10 * p
}

// writeRow draws one row's bars, and in a lane the overlaps on top.
func (tl *timeline) writeRow(w io.Writer, r tlRow, y int, scale, width float64) {
	if r.Lane {
		fmt.Fprintf(w, "<rect x=\"0\" y=\"%d\" width=\"%.0f\" height=\"%d\" fill=\"#f1f3f6\"/>\n", y, width, tlRowH)
	}
	barY := y + (tlRowH-tlBarH)/2
	for _, s := range r.Spans {
		opacity := 1.0
		if r.Lane && s.Kind == spanShared {
			opacity = 0.5 // overlapping shared holds show darker
		}
		bar(w, s, barY, tlBarH, scale, kindColor[s.Kind], opacity)
	}
	if r.Lane {
		for _, c := range conflictsOf(r.Spans) {
			bar(w, c, y+1, tlRowH-2, scale, conflictColor, 1)
		}
	}
}

// bar draws one rectangle, at least half a pixel wide, with its tooltip.
func bar(w io.Writer, s tlSpan, y, h int, scale float64, color string, opacity float64) {
	x := s.Start.Seconds() * scale
	wd := max((s.End-s.Start).Seconds()*scale, 0.5)
	fill := color
	if opacity < 1 {
		fill += fmt.Sprintf("\" fill-opacity=\"%g", opacity)
	}
	fmt.Fprintf(w, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>%s %v-%v (%v)</title></rect>\n",
		x, y, wd, h, fill, html.EscapeString(s.Note), s.Start.Round(time.Microsecond), s.End.Round(time.Microsecond),
		(s.End - s.Start).Round(time.Microsecond))
}

// conflictsOf returns the intervals where an exclusive hold overlaps another
// hold (shared holds may overlap each other).
func conflictsOf(spans []tlSpan) []tlSpan {
	var holds []tlSpan
	for _, s := range spans {
		if s.Kind == spanHold || s.Kind == spanShared {
			holds = append(holds, s)
		}
	}
	slices.SortFunc(holds, func(a, b tlSpan) int { return cmp.Compare(a.Start, b.Start) })
	var out, active []tlSpan
	for _, s := range holds {
		active = slices.DeleteFunc(active, func(a tlSpan) bool { return a.End <= s.Start })
		for _, a := range active {
			if a.Kind == spanHold || s.Kind == spanHold {
				out = append(out, tlSpan{Start: s.Start, End: min(a.End, s.End), Kind: spanHold,
					Note: fmt.Sprintf("OVERLAP: %s and %s", a.Note, s.Note)})
			}
		}
		active = append(active, s)
	}
	return out
}
