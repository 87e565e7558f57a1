package lockactor_test

// The Go code in README.md, CONTRIBUTING.md and docs/*.md is checked by go
// test, so that what a reader copies compiles and does what the page says.
// This file keeps the pages and the code in step:
//
//   - a ```go block whose first line is "// example: ExampleName" shows an
//     Example function of a *_test.go file of this directory: its body,
//     de-indented one tab, from the line after "// Shown from here." (or
//     from the top when the body has no such line) up to its "// Output:"
//     comment;
//   - that Example has an "// Output:" comment, so that go test runs it;
//   - an Example with a "// Shown from here." line is shown in at least one
//     of the files;
//   - README.md has exactly one ```go block that starts with "package main":
//     a whole program, followed by a plain ``` block holding what it prints.
//     TestReadmeProgramRuns (readme_program_test.go) runs it. No other file
//     has such a block, and every other Go block names an Example.
//
// Other fenced blocks (```sh, plain ```) are not Go and are not checked.
//
// After changing an Example, or to fill a new block that holds only its
// "// example: ExampleName" line, copy the bodies into the Markdown files
// with
//
//	LOCKACTOR_README_UPDATE=1 go test -run TestDocsMatchExamples .

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	exampleTag    = "// example: " // the first line of a Go block that shows an Example
	exampleMarker = "// Shown from here."
	programStart  = "package main" // the first line of README.md's whole program
	programDoc    = "README.md"    // the one file with a whole program
	docsUpdateEnv = "LOCKACTOR_README_UPDATE"
)

// markdownDoc is one checked Markdown file.
type markdownDoc struct {
	path string // relative to the repository root, e.g. "docs/METRICS.md"
	text string
}

// shownExample is the part of an Example function that the docs show.
type shownExample struct {
	name      string
	file      string
	lines     []string // the body from the marker to the Output comment, de-indented
	hasOutput bool     // go test runs it and checks its output
	marked    bool     // the body has an exampleMarker line
}

// fencedBlock is one fenced code block of a Markdown file.
type fencedBlock struct {
	line  int    // of the opening fence, 1-based
	lang  string // the info string's first word: "go", "sh", "" ...
	body  []string
	start int // index in the file's lines of the block's first content line
	end   int // index of the closing fence
}

// goBlock is a fenced Go block: one that shows an Example (tag set), the
// whole program (program set), or a block that is neither (a mistake).
type goBlock struct {
	fencedBlock
	tag     string   // the Example it names; "" when its first line names none
	program bool     // its first line is programStart
	lines   []string // after the tag line, trimmed (trimBlank)
}

// docFiles lists the checked Markdown files: README.md, CONTRIBUTING.md and
// docs/*.md.
func docFiles() ([]string, error) {
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(docs)
	return append([]string{"README.md", "CONTRIBUTING.md"}, docs...), nil
}

// loadDocs reads the checked Markdown files and the package's Examples.
func loadDocs(t *testing.T) ([]markdownDoc, map[string]shownExample) {
	t.Helper()
	paths, err := docFiles()
	if err != nil {
		t.Fatal(err)
	}
	var docs []markdownDoc
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, markdownDoc{path: filepath.ToSlash(p), text: string(text)})
	}
	examples, err := exampleFuncs(".")
	if err != nil {
		t.Fatal(err)
	}
	return docs, examples
}

// TestDocsMatchExamples fails when a Go block of README.md, CONTRIBUTING.md
// or docs/*.md and the Example it names differ (see the top of this file);
// with LOCKACTOR_README_UPDATE=1 it first copies the Examples into the pages.
func TestDocsMatchExamples(t *testing.T) {
	docs, examples := loadDocs(t)
	if os.Getenv(docsUpdateEnv) == "1" {
		for i, d := range docs {
			updated := withExamples(d.text, examples)
			if updated == d.text {
				continue
			}
			if err := os.WriteFile(d.path, []byte(updated), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: Go blocks copied from their Examples", d.path)
			docs[i].text = updated
		}
	}
	for _, p := range docsDrift(docs, examples) {
		t.Error(p)
	}
	if t.Failed() {
		t.Logf("fix the page or the Example; or, if the Example is right, run\n\t%s=1 go test -run TestDocsMatchExamples .", docsUpdateEnv)
	}
}

// TestDocsDriftIsCaught checks the checker: each kind of drift, made in a
// copy of the docs, is reported, naming the Example, the file or the line.
func TestDocsDriftIsCaught(t *testing.T) {
	docs, examples := loadDocs(t)
	if got := docsDrift(docs, examples); len(got) != 0 {
		t.Fatalf("the real docs drift: %v", got)
	}
	// first returns the first block of path that shows an Example.
	first := func(path string) goBlock {
		for _, d := range docs {
			if d.path != path {
				continue
			}
			for _, b := range goBlocks(d.text) {
				if b.tag != "" {
					return b
				}
			}
		}
		t.Fatalf("%s has no Go block that shows an Example", path)
		return goBlock{}
	}
	readme, metrics := first("README.md"), first("docs/METRICS.md")
	program := "```go\npackage main\n\nfunc main() {}\n```\n\n```\n\n```\n"

	cases := []struct {
		what string
		path string                        // the file edited; "" for every file
		edit func(lines []string) []string // on a copy of its lines
		want []string                      // what the report must name
	}{
		{"a line changed", "README.md", func(ls []string) []string {
			ls[readme.start+1] += " // edited"
			return ls
		}, []string{"README.md", readme.tag}},
		{"a line added", "docs/METRICS.md", func(ls []string) []string {
			return insert(ls, metrics.end, "extra()")
		}, []string{"docs/METRICS.md", metrics.tag}},
		{"an unknown Example", "docs/METRICS.md", func(ls []string) []string {
			ls[metrics.start] = exampleTag + "ExampleNoSuchThing"
			return ls
		}, []string{"docs/METRICS.md", "ExampleNoSuchThing"}},
		{"a Go block without a tag", "CONTRIBUTING.md", func(ls []string) []string {
			return append(ls, "```go", "fmt.Println(1)", "```")
		}, []string{"CONTRIBUTING.md", "names no Example"}},
		{"an Example shown nowhere", "", func(ls []string) []string {
			return withoutBlocks(ls, metrics.tag)
		}, []string{metrics.tag, "shown nowhere"}},
		{"a program outside README.md", "docs/USAGE.md", func(ls []string) []string {
			return append(ls, strings.Split(program, "\n")...)
		}, []string{"docs/USAGE.md", programStart}},
		{"a second program in README.md", "README.md", func(ls []string) []string {
			return append(ls, strings.Split(program, "\n")...)
		}, []string{"README.md", "2 Go blocks"}},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			edited := append([]markdownDoc(nil), docs...)
			found := false
			for i, d := range edited {
				if c.path == "" || d.path == c.path {
					lines := append([]string(nil), strings.Split(d.text, "\n")...)
					edited[i].text = strings.Join(c.edit(lines), "\n")
					found = true
				}
			}
			if !found {
				t.Fatalf("%s is not among the checked files", c.path)
			}
			got := strings.Join(docsDrift(edited, examples), "\n")
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("reported %q, want a problem naming %q", got, w)
				}
			}
		})
	}
}

// withoutBlocks returns lines without the Go blocks that name tag.
func withoutBlocks(lines []string, tag string) []string {
	blocks := goBlocks(strings.Join(lines, "\n"))
	for i := len(blocks) - 1; i >= 0; i-- {
		if b := blocks[i]; b.tag == tag {
			lines = append(lines[:b.line-1], lines[b.end+1:]...)
		}
	}
	return lines
}

// insert returns lines with l inserted before index i.
func insert(lines []string, i int, l string) []string {
	return append(lines[:i], append([]string{l}, lines[i:]...)...)
}

// docsDrift lists every way the docs and the Examples disagree.
func docsDrift(docs []markdownDoc, examples map[string]shownExample) []string {
	var problems []string
	shown := map[string]bool{}
	for _, d := range docs {
		programs := 0
		for _, b := range goBlocks(d.text) {
			switch {
			case b.program:
				programs++
				if d.path != programDoc {
					problems = append(problems, fmt.Sprintf("%s:%d: a Go block starts with %q, but only %s has a whole program (the rest show Examples)", d.path, b.line, programStart, programDoc))
				}
			case b.tag == "":
				problems = append(problems, fmt.Sprintf("%s:%d: this Go block names no Example: its first line must be %q followed by the name of an Example function", d.path, b.line, exampleTag))
			default:
				shown[b.tag] = true
				problems = append(problems, exampleDrift(d.path, b, examples)...)
			}
		}
		if d.path == programDoc && programs != 1 {
			problems = append(problems, fmt.Sprintf("%s: %d Go blocks start with %q; want exactly one, the program TestReadmeProgramRuns runs", d.path, programs, programStart))
		}
	}
	var names []string
	for name, ex := range examples {
		if ex.marked && !shown[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		problems = append(problems, fmt.Sprintf("%s: %s has a %q line but is shown nowhere: no Go block of README.md, CONTRIBUTING.md or docs/*.md names it", examples[name].file, name, exampleMarker))
	}
	return problems
}

// exampleDrift lists the ways block b of the file at path differs from the
// Example it names.
func exampleDrift(path string, b goBlock, examples map[string]shownExample) []string {
	ex, ok := examples[b.tag]
	if !ok {
		return []string{fmt.Sprintf("%s:%d: the Go block shows %s, which no *_test.go file here defines", path, b.line, b.tag)}
	}
	var problems []string
	if !ex.hasOutput {
		problems = append(problems, fmt.Sprintf("%s: %s has no // Output: comment, so go test does not run the block at %s:%d", ex.file, b.tag, path, b.line))
	}
	if d := firstDifference(b.lines, ex.lines); d != "" {
		problems = append(problems, fmt.Sprintf("%s:%d: the Go block differs from %s in %s: %s", path, b.line, b.tag, ex.file, d))
	}
	return problems
}

// firstDifference describes where two snippets first differ; "" when equal.
func firstDifference(doc, example []string) string {
	for i := 0; i < max(len(doc), len(example)); i++ {
		switch {
		case i >= len(doc):
			return fmt.Sprintf("the block ends at its line %d; the Example goes on with %q", i+1, example[i])
		case i >= len(example):
			return fmt.Sprintf("the Example ends before the block's line %d, %q", i+1, doc[i])
		case doc[i] != example[i]:
			return fmt.Sprintf("line %d of the block:\n\tdoc:     %q\n\tExample: %q", i+1, doc[i], example[i])
		}
	}
	return ""
}

// withExamples rewrites each Go block of text that names an Example with
// that Example's body.
func withExamples(text string, examples map[string]shownExample) string {
	lines := strings.Split(text, "\n")
	var out bytes.Buffer
	next := 0
	for _, b := range goBlocks(text) {
		ex, ok := examples[b.tag]
		if b.tag == "" || !ok {
			continue // docsDrift reports it
		}
		for _, l := range lines[next:b.start] {
			out.WriteString(l + "\n")
		}
		out.WriteString(exampleTag + b.tag + "\n")
		for _, l := range ex.lines {
			out.WriteString(l + "\n")
		}
		next = b.end
	}
	out.WriteString(strings.Join(lines[next:], "\n"))
	return out.String()
}
