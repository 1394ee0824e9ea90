package benchkit

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
)

// Write writes the raw results to -out (SaveResults) and the Markdown
// section to -section and -doc (WriteSection).
func (p *Program) Write(results any, section string) error {
	if err := p.SaveResults(results); err != nil {
		return err
	}
	if err := p.WriteSection(section); err != nil {
		return err
	}
	log.Printf("wrote %s and %s", p.Out, p.Section)
	return nil
}

// SaveResults writes results to -out as indented JSON; a benchmark that
// saves after each agent keeps what it had when a later one fails.
func (p *Program) SaveResults(results any) error {
	data, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.Out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p.Out, append(data, '\n'), 0o644)
}

// LoadResults reads -out into results: the section written again from an
// earlier run's results.
func (p *Program) LoadResults(results any) error {
	data, err := os.ReadFile(p.Out)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, results)
}

// WriteSection writes the Markdown section to -section and, with -doc,
// puts it into that page between the program's markers.
func (p *Program) WriteSection(section string) error {
	if err := os.MkdirAll(filepath.Dir(p.Section), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p.Section, []byte(section), 0o644); err != nil {
		return err
	}
	if p.Doc == "" {
		return nil
	}
	begin, end := p.markers()
	return splice(p.Doc, begin, end, section)
}

// markers are the comments around the program's section in a page, as
// hack/bench.sh writes them.
func (p *Program) markers() (begin, end string) {
	return fmt.Sprintf("<!-- %s: begin (bench/%s) -->", p.Name, p.Name), fmt.Sprintf("<!-- %s: end -->", p.Name)
}

// splice puts section between the markers begin and end of the Markdown
// page doc, replacing what was there, or inserts it before "## Raw output"
// (or at the end).
func splice(doc, begin, end, section string) error {
	data, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	page := string(data)
	block := begin + "\n" + section + end + "\n"
	if i, j := strings.Index(page, begin), strings.Index(page, end); i >= 0 && j > i {
		page = page[:i] + block + page[j+len(end)+1:]
	} else if i := strings.Index(page, "## Raw output"); i >= 0 {
		page = page[:i] + block + "\n" + page[i:]
	} else {
		page += "\n" + block
	}
	if err := os.WriteFile(doc, []byte(page), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", doc, err)
	}
	return nil
}
