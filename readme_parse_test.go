package lockactor_test

// Reading the two sides that readme_test.go compares: the fenced blocks of
// a Markdown page, and the part of each Example function that a page shows.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

var fenceRE = regexp.MustCompile("^(```+|~~~+)[ \t]*([^ \t`]*)")

// fencedBlocks returns the fenced code blocks of a Markdown text.
func fencedBlocks(text string) []fencedBlock {
	var blocks []fencedBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		fence := m[1]
		end := i + 1
		for end < len(lines) && !isClosingFence(lines[end], fence) {
			end++
		}
		blocks = append(blocks, fencedBlock{line: i + 1, lang: m[2], body: lines[i+1 : end], start: i + 1, end: end})
		i = end
	}
	return blocks
}

// goBlocks returns the fenced Go blocks of a Markdown text. The lines of
// each are those after the tag line, with trailing spaces and leading and
// trailing blank lines dropped.
func goBlocks(text string) []goBlock {
	var blocks []goBlock
	for _, f := range fencedBlocks(text) {
		if f.lang != "go" && f.lang != "golang" {
			continue
		}
		b := goBlock{fencedBlock: f}
		body := f.body
		if len(body) > 0 {
			first := strings.TrimSpace(body[0])
			if name, ok := strings.CutPrefix(first, exampleTag); ok {
				b.tag = strings.TrimSpace(name)
				body = body[1:]
			}
			b.program = first == programStart
		}
		b.lines = trimBlank(body)
		blocks = append(blocks, b)
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

// exampleFuncs reads every Example function of the *_test.go files in dir.
func exampleFuncs(dir string) (map[string]shownExample, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	examples := map[string]shownExample{}
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

// exampleBody cuts the part the docs show out of fn's source.
func exampleBody(fset *token.FileSet, src []byte, f *ast.File, fn *ast.FuncDecl) shownExample {
	ex := shownExample{name: fn.Name.Name}
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
		if strings.TrimSpace(l) == exampleMarker {
			lines, ex.marked = nil, true
			continue
		}
		lines = append(lines, l)
	}
	ex.lines = trimBlank(lines)
	return ex
}
