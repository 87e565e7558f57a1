package main

import (
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

// screenshot renders page with headless Chromium into a 1200x800 PNG.
func screenshot(t *testing.T, page, png string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromiumPath, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--user-data-dir="+t.TempDir(), "--screenshot="+png, "--window-size=1200,800",
		"file://"+page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
}

// TestTimelineRendersInChromium writes the timeline of a short contention
// run, renders it in headless Chromium and checks that the picture shows
// bars: many non-white pixels, several colours, and both the wait and the
// hold colour.
func TestTimelineRendersInChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("chromium is not installed (%v): apt-get install -y chromium", err)
	}
	dir := t.TempDir()
	page, shot := filepath.Join(dir, "timeline.html"), filepath.Join(dir, "timeline.png")
	code, stdout, stderr := runDemo(t, "contention", "--duration", "500ms", "--procs", "2", "--goroutines", "3",
		"--keys", "1", "--hold", "5ms", "--timeline", page)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	start := time.Now()
	screenshot(t, page, shot)
	t.Logf("chromium took %v", time.Since(start).Round(time.Millisecond))

	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", shot, err)
	}
	st := pixelStats(img)
	t.Logf("%dx%d, %d colours, %.1f%% non-white", img.Bounds().Dx(), img.Bounds().Dy(), len(st.colors), 100*st.nonWhite)
	if len(st.colors) < 8 || st.nonWhite < 0.05 {
		t.Errorf("the screenshot looks blank: %d colours, %.1f%% non-white", len(st.colors), 100*st.nonWhite)
	}
	for _, kind := range []spanKind{spanWait, spanHold} {
		if c := kindColor[kind]; st.colors[c] < 100 {
			t.Errorf("colour %s (kind %d) covers %d pixels, want bars of it", c, kind, st.colors[c])
		}
	}
	// The legend's swatch of the overlap colour is 14x10 pixels; anything
	// beyond it would be an overlap drawn in a lane.
	if n := st.colors[conflictColor]; n > 14*10 {
		t.Errorf("overlap colour %s covers %d pixels, want only the legend's 140", conflictColor, n)
	}
}

// stats is a picture's colours ("#rrggbb" -> pixel count) and its share of
// non-white pixels.
type stats struct {
	colors   map[string]int
	nonWhite float64
}

func pixelStats(img image.Image) stats {
	st := stats{colors: map[string]int{}}
	b := img.Bounds()
	nonWhite := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			st.colors[hexColor(c)]++
			if c.R < 250 || c.G < 250 || c.B < 250 {
				nonWhite++
			}
		}
	}
	st.nonWhite = float64(nonWhite) / float64(b.Dx()*b.Dy())
	return st
}

func hexColor(c color.NRGBA) string {
	const digits = "0123456789abcdef"
	var sb strings.Builder
	sb.WriteByte('#')
	for _, v := range []uint8{c.R, c.G, c.B} {
		sb.WriteByte(digits[v>>4])
		sb.WriteByte(digits[v&15])
	}
	return sb.String()
}

func TestConflictsOf(t *testing.T) {
	ms := time.Millisecond
	spans := []tlSpan{
		{Start: 0, End: 10 * ms, Kind: spanShared},
		{Start: 5 * ms, End: 15 * ms, Kind: spanShared}, // readers may overlap
		{Start: 20 * ms, End: 30 * ms, Kind: spanHold},
		{Start: 30 * ms, End: 35 * ms, Kind: spanHold}, // touching is fine
		{Start: 40 * ms, End: 50 * ms, Kind: spanHold},
		{Start: 45 * ms, End: 60 * ms, Kind: spanShared}, // a reader inside a writer
		{Start: 0, End: 100 * ms, Kind: spanWait},        // waits never conflict
	}
	got := conflictsOf(spans)
	if len(got) != 1 || got[0].Start != 45*ms || got[0].End != 50*ms {
		t.Errorf("conflictsOf = %+v, want one [45ms, 50ms]", got)
	}
}
