package lockactor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockactor/lockactor/internal/redistest"
)

const (
	// programAddr is the Redis address README.md's program uses; the test
	// points it at a redis-server of its own.
	programAddr = "localhost:6379"
	// programModule is the module path of the temporary module.
	programModule = "example.com/readmeprogram"
	// programTimeout bounds go run: compiling the dependencies with an
	// empty build cache takes about a minute on 2 cores.
	programTimeout = 5 * time.Minute
)

// TestReadmeProgramRuns runs README.md's whole program as a reader would:
// pasted into main.go of a new module that requires lockactor, here
// replaced by this checkout. The module copies this repository's go.mod
// requirements and go.sum, so go run needs no network (GOPROXY=off); the
// program's "localhost:6379" becomes the address of a redis-server the test
// starts. Its output must be the plain block that follows it in README.md.
func TestReadmeProgramRuns(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, want, err := readmeProgram(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if n := strings.Count(src, `"`+programAddr+`"`); n != 1 {
		t.Fatalf("README.md's program has %q %d times; want once, as redis.Options.Addr, for the test to replace", programAddr, n)
	}
	if testing.Short() {
		t.Skip("-short: not compiling and running README.md's program")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	srv := redistest.Start(t)
	src = strings.Replace(src, `"`+programAddr+`"`, `"`+srv.Addr()+`"`, 1)

	dir := t.TempDir()
	if err := writeProgramModule(dir, src); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), programTimeout)
	defer cancel()
	args := []string{"run"}
	if raceEnabled {
		args = append(args, "-race") // reuses the build cache of this test binary's dependencies
	}
	cmd := exec.CommandContext(ctx, goBin, append(args, ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GOFLAGS=-mod=mod", // go.mod is copied, not tidied: go may complete it, from the module cache
		"GOPROXY=off",      // no network: everything comes from the module cache
		"GOWORK=off",
		"GOTOOLCHAIN=local",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	t.Logf("go %s . took %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("go run did not finish within %v\nstderr:\n%s", programTimeout, stderr.String())
	}
	if err != nil {
		t.Fatalf("go run of README.md's program: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != want {
		t.Errorf("README.md's program printed\n%s\nwant, as README.md shows after it,\n%s\nstderr:\n%s", got, want, stderr.String())
	}
}

// readmeProgram returns README.md's one Go block that starts with "package
// main" and the text of the plain fenced block right after it, which shows
// what the program prints.
func readmeProgram(readme string) (src, output string, err error) {
	blocks := fencedBlocks(readme)
	found := -1
	for i, b := range blocks {
		if (b.lang == "go" || b.lang == "golang") && len(b.body) > 0 && strings.TrimSpace(b.body[0]) == programStart {
			if found >= 0 {
				return "", "", fmt.Errorf("two Go blocks start with %q, at lines %d and %d; want one", programStart, blocks[found].line, b.line)
			}
			found = i
		}
	}
	if found < 0 {
		return "", "", fmt.Errorf("no Go block starts with %q", programStart)
	}
	prog := blocks[found]
	if found+1 == len(blocks) || blocks[found+1].lang != "" {
		return "", "", fmt.Errorf("the program at line %d is not followed by a plain ``` block showing its output", prog.line)
	}
	src = strings.Join(prog.body, "\n") + "\n"
	output = strings.Join(trimBlank(blocks[found+1].body), "\n")
	return src, output, nil
}

var moduleLineRE = regexp.MustCompile(`(?m)^module .*$`)

// writeProgramModule writes src as main.go of a new module in dir whose
// go.mod holds this repository's go directive and requirements, a
// requirement on lockactor, and a replace of lockactor by this checkout, and
// whose go.sum is this repository's.
func writeProgramModule(dir, src string) error {
	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		return err
	}
	if !moduleLineRE.Match(gomod) {
		return errors.New("go.mod has no module line")
	}
	mod := moduleLineRE.ReplaceAllLiteralString(string(gomod), "module "+programModule)
	mod += fmt.Sprintf("\nrequire github.com/lockactor/lockactor v0.0.0\n\nreplace github.com/lockactor/lockactor => %q\n", root)
	gosum, err := os.ReadFile("go.sum")
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"go.mod": []byte(mod), "go.sum": gosum, "main.go": []byte(src)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
