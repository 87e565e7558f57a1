package lockactor_test

// README.md's Go snippets are the bodies of the package's Examples, so that
// each one compiles and runs (with its // Output: checked) in go test. This
// file keeps the two in step:
//
//   - every ```go block in README.md starts with the line
//     "// example: ExampleName", naming an Example function in a *_test.go
//     file of this directory;
//   - the rest of the block is that function's body, de-indented one tab,
//     from the line after "// README from here." (or from the top when the
//     body has no such line) up to its "// Output:" comment;
//   - the Example has an "// Output:" comment, so that go test runs it;
//   - an Example with a "// README from here." line is shown in README.md.
//
// Other fenced blocks (```sh, plain ```) are not Go and are not checked.
//
// After changing an Example, or to fill a new README block that holds only
// its "// example: ExampleName" line, copy the bodies into README.md with
//
//	LOCKACTOR_README_UPDATE=1 go test -run TestReadmeMatchesExamples .

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const (
	readmeTag    = "// example: " // the first line of a README Go block
	readmeMarker = "// README from here."
	readmeUpdate = "LOCKACTOR_README_UPDATE"
)

// readmeExample is the part of an Example function that README.md shows.
type readmeExample struct {
	name      string
	file      string
	lines     []string // the body from the marker to the Output comment, de-indented
	hasOutput bool     // go test runs it and checks its output
	marked    bool     // the body has a readmeMarker line
}

// readmeBlock is one fenced ```go block of README.md.
type readmeBlock struct {
	line  int    // of the opening fence, 1-based
	tag   string // the Example it names; "" when its first line names none
	lines []string
	start int // index in the README's lines of the block's first content line
	end   int // index of the closing fence
}

// loadReadme reads README.md and the package's Examples.
func loadReadme(t *testing.T) ([]byte, map[string]readmeExample) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := readmeExamples(".")
	if err != nil {
		t.Fatal(err)
	}
	return readme, examples
}

func TestReadmeMatchesExamples(t *testing.T) {
	readme, examples := loadReadme(t)
	if os.Getenv(readmeUpdate) == "1" {
		updated := readmeWithExamples(string(readme), examples)
		if updated != string(readme) {
			if err := os.WriteFile("README.md", []byte(updated), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Log("README.md: Go blocks copied from their Examples")
		}
		readme = []byte(updated)
	}
	for _, p := range readmeDrift(string(readme), examples) {
		t.Error(p)
	}
	if t.Failed() {
		t.Logf("fix the README or the Example; or, if the Example is right, run\n\t%s=1 go test -run TestReadmeMatchesExamples .", readmeUpdate)
	}
}

// TestReadmeDriftIsCaught checks the checker: each kind of drift in a copy of
// README.md is reported, naming the Example or the line.
func TestReadmeDriftIsCaught(t *testing.T) {
	readme, examples := loadReadme(t)
	text := string(readme)
	blocks := readmeGoBlocks(text)
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go blocks")
	}
	b := blocks[0]
	lines := strings.Split(text, "\n")
	edit := func(f func(ls []string) []string) string {
		return strings.Join(f(append([]string(nil), lines...)), "\n")
	}
	cases := []struct {
		what, readme, want string
	}{
		{"a line changed", edit(func(ls []string) []string {
			ls[b.start+1] += " // edited"
			return ls
		}), b.tag},
		{"a line added", edit(func(ls []string) []string {
			return append(ls[:b.end], append([]string{"extra()"}, ls[b.end:]...)...)
		}), b.tag},
		{"an unknown Example", edit(func(ls []string) []string {
			ls[b.start] = readmeTag + "ExampleNoSuchThing"
			return ls
		}), "ExampleNoSuchThing"},
		{"a Go block without a tag", text + "\n```go\nfmt.Println(1)\n```\n", "names no Example"},
		{"an Example missing from the README", edit(func(ls []string) []string {
			return append(ls[:b.line-1], ls[b.end+1:]...)
		}), b.tag},
	}
	if got := readmeDrift(text, examples); len(got) != 0 {
		t.Fatalf("the real README drifts: %v", got)
	}
	for _, c := range cases {
		got := readmeDrift(c.readme, examples)
		if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), c.want) {
			t.Errorf("%s: reported %q, want a problem naming %q", c.what, got, c.want)
		}
	}
}

// readmeDrift lists every way README.md and the Examples disagree.
func readmeDrift(readme string, examples map[string]readmeExample) []string {
	var problems []string
	shown := map[string]bool{}
	for _, b := range readmeGoBlocks(readme) {
		if b.tag == "" {
			problems = append(problems, fmt.Sprintf("README.md:%d: this Go block names no Example: its first line must be %q followed by the name of an Example function", b.line, readmeTag))
			continue
		}
		shown[b.tag] = true
		ex, ok := examples[b.tag]
		if !ok {
			problems = append(problems, fmt.Sprintf("README.md:%d: the Go block shows %s, which no *_test.go file here defines", b.line, b.tag))
			continue
		}
		if !ex.hasOutput {
			problems = append(problems, fmt.Sprintf("%s: %s has no // Output: comment, so go test does not run the README's block at line %d", ex.file, b.tag, b.line))
		}
		if d := firstDifference(b.lines, ex.lines); d != "" {
			problems = append(problems, fmt.Sprintf("README.md:%d: the Go block differs from %s in %s: %s", b.line, b.tag, ex.file, d))
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
		problems = append(problems, fmt.Sprintf("%s: %s has a %q line but no README.md Go block shows it", examples[name].file, name, readmeMarker))
	}
	return problems
}

// firstDifference describes where two snippets first differ; "" when equal.
func firstDifference(readme, example []string) string {
	for i := 0; i < max(len(readme), len(example)); i++ {
		switch {
		case i >= len(readme):
			return fmt.Sprintf("the README block ends at its line %d; the Example goes on with %q", i+1, example[i])
		case i >= len(example):
			return fmt.Sprintf("the Example ends before the README block's line %d, %q", i+1, readme[i])
		case readme[i] != example[i]:
			return fmt.Sprintf("line %d of the block:\n\tREADME:  %q\n\tExample: %q", i+1, readme[i], example[i])
		}
	}
	return ""
}

var fenceRE = regexp.MustCompile("^(```+|~~~+)[ \t]*([^ \t`]*)")

// readmeGoBlocks returns README.md's fenced Go blocks. The lines of each
// are those after the tag line, with trailing spaces and leading and
// trailing blank lines dropped.
func readmeGoBlocks(readme string) []readmeBlock {
	var blocks []readmeBlock
	lines := strings.Split(readme, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		fence, lang := m[1], m[2]
		end := i + 1
		for end < len(lines) && !isClosingFence(lines[end], fence) {
			end++
		}
		if lang == "go" || lang == "golang" {
			b := readmeBlock{line: i + 1, start: i + 1, end: end}
			body := lines[i+1 : end]
			if len(body) > 0 {
				if name, ok := strings.CutPrefix(strings.TrimSpace(body[0]), readmeTag); ok {
					b.tag = strings.TrimSpace(name)
					body = body[1:]
				}
			}
			b.lines = trimBlank(body)
			blocks = append(blocks, b)
		}
		i = end
	}
	return blocks
}

func isClosingFence(line, fence string) bool {
	t := strings.TrimRight(line, " \t")
	return strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == ""
}

// trimBlank drops trailing spaces from each line and blank lines at both ends.
func trimBlank(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimRight(l, " \t\r")
	}
	for len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

var outputRE = regexp.MustCompile(`(?i)^[[:space:]]*(unordered )?output:`)

// readmeExamples reads every Example function of the *_test.go files in dir.
func readmeExamples(dir string) (map[string]readmeExample, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	examples := map[string]readmeExample{}
	fset := token.NewFileSet()
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Example") {
				continue
			}
			ex := exampleBody(fset, src, f, fn)
			ex.file = filepath.Base(path)
			examples[ex.name] = ex
		}
	}
	return examples, nil
}

// exampleBody cuts the README's part out of fn's source.
func exampleBody(fset *token.FileSet, src []byte, f *ast.File, fn *ast.FuncDecl) readmeExample {
	ex := readmeExample{name: fn.Name.Name}
	from := fset.Position(fn.Body.Lbrace).Offset + 1
	to := fset.Position(fn.Body.Rbrace).Offset
	for _, cg := range f.Comments {
		if cg.Pos() > fn.Body.Lbrace && cg.End() < fn.Body.Rbrace && outputRE.MatchString(cg.Text()) {
			ex.hasOutput = true
			to = fset.Position(cg.Pos()).Offset
			break
		}
	}
	var lines []string
	for _, l := range strings.Split(string(src[from:to]), "\n") {
		l = strings.TrimPrefix(l, "\t")
		if strings.TrimSpace(l) == readmeMarker {
			lines, ex.marked = nil, true
			continue
		}
		lines = append(lines, l)
	}
	ex.lines = trimBlank(lines)
	return ex
}

// readmeWithExamples rewrites each tagged Go block of readme with the body of
// the Example it names.
func readmeWithExamples(readme string, examples map[string]readmeExample) string {
	lines := strings.Split(readme, "\n")
	var out bytes.Buffer
	next := 0
	for _, b := range readmeGoBlocks(readme) {
		ex, ok := examples[b.tag]
		if !ok {
			continue // readmeDrift reports it
		}
		for _, l := range lines[next:b.start] {
			out.WriteString(l + "\n")
		}
		out.WriteString(readmeTag + b.tag + "\n")
		for _, l := range ex.lines {
			out.WriteString(l + "\n")
		}
		next = b.end
	}
	out.WriteString(strings.Join(lines[next:], "\n"))
	return out.String()
}
