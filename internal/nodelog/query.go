package nodelog

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Upstream's limits.
const (
	// journalDateLayout is how --since and --until are given to journalctl.
	journalDateLayout = "2006-1-2 15:4:5"
	maxTailLines      = 100000
	maxServiceLength  = 256
	maxServices       = 4
)

// unsafeServiceChars are characters never passed to journalctl in a unit
// name: a broad defence against input that could be read as an option.
var unsafeServiceChars = regexp.MustCompile(`[^a-zA-Z\-_.:0-9@]+`)

// Query is a parsed node log query: services (journal units) or files
// (paths under the log directory), never both, and the options that apply
// to services.
type Query struct {
	Services []string
	Files    []string
	Options
}

// Options narrow a service query.
type Options struct {
	// SinceTime and UntilTime bound the entries (RFC 3339 in the query).
	SinceTime *time.Time
	UntilTime *time.Time
	// TailLines is the number of entries from the end, at most 100000.
	TailLines *int
	// Boot is a boot offset: 0 the current boot, -1 the one before.
	Boot *int
	// Pattern is a PCRE2 regular expression entries must match.
	Pattern string
}

// Parse reads a request's query parameters. It returns nil and no errors
// when the request is not a query (a plain /logs/PATH); errors are the
// request's fault (400).
func Parse(values url.Values) (*Query, field.ErrorList) {
	var errs field.ErrorList
	var q Query
	queries, present := values["query"]
	for _, v := range queries {
		// A slash hints at a file; anything else non-blank is a service.
		if strings.ContainsAny(v, `/\`) {
			q.Files = append(q.Files, v)
		} else if strings.TrimSpace(v) != "" {
			q.Services = append(q.Services, v)
		}
	}
	if present && len(q.Files) == 0 && len(q.Services) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("query"), queries, "may not be empty"))
	}
	parseTime := func(name string) *time.Time {
		v := values.Get(name)
		if v == "" {
			return nil
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(name), v, "invalid time format"))
			return nil
		}
		return &t
	}
	parseInt := func(name string) *int {
		v := values.Get(name)
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(name), v, err.Error()))
			return nil
		}
		return &n
	}
	q.SinceTime = parseTime("sinceTime")
	q.UntilTime = parseTime("untilTime")
	q.Boot = parseInt("boot")
	q.TailLines = parseInt("tailLines")
	q.Pattern = values.Get("pattern")
	if len(errs) > 0 {
		return nil, errs
	}
	if len(q.Services) == 0 && len(q.Files) == 0 && q.Options == (Options{}) {
		return nil, nil
	}
	return &q, nil
}

// Validate checks a parsed query against upstream's rules; errors are
// answered 406. A file must exist under logDir (and not escape it).
func (q *Query) Validate(logDir string) field.ErrorList {
	var errs field.ErrorList
	for _, s := range q.Services {
		if err := safeServiceName(s); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("query"), s, err.Error()))
		}
	}
	if len(q.Services) > maxServices {
		errs = append(errs, field.TooMany(field.NewPath("query"), len(q.Services), maxServices))
	}
	switch {
	case len(q.Files) == 0 && len(q.Services) == 0:
		errs = append(errs, field.Required(field.NewPath("query"), "cannot be empty with options"))
	case len(q.Files) > 0 && len(q.Services) > 0:
		errs = append(errs, field.Invalid(field.NewPath("query"), fmt.Sprintf("%v, %v", q.Files, q.Services),
			"cannot specify a file and service"))
	case len(q.Files) > 1:
		errs = append(errs, field.Invalid(field.NewPath("query"), q.Files, "cannot specify more than one file"))
	case len(q.Files) == 1 && q.Options != (Options{}):
		errs = append(errs, field.Invalid(field.NewPath("query"), q.Files, "cannot specify file with options"))
	case len(q.Files) == 1:
		// Relative to the log directory, a leading slash included, as
		// upstream documents (its os.Root check refuses "/foo.log" with
		// "path escapes from parent" and never serves it).
		if root, err := os.OpenRoot(logDir); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("query"), q.Files, err.Error()))
		} else {
			defer func() { _ = root.Close() }()
			if _, err := root.Stat(strings.TrimLeft(q.Files[0], `/\`)); err != nil {
				errs = append(errs, field.Invalid(field.NewPath("query"), q.Files, err.Error()))
			}
		}
	}
	if q.SinceTime != nil && q.UntilTime != nil && q.SinceTime.After(*q.UntilTime) {
		errs = append(errs, field.Invalid(field.NewPath("untilTime"), q.UntilTime, "must be after `sinceTime`"))
	}
	if q.Boot != nil && *q.Boot > 0 {
		errs = append(errs, field.Invalid(field.NewPath("boot"), *q.Boot, "must be less than 1"))
	}
	if q.TailLines != nil {
		if msgs := utilvalidation.IsInRange(*q.TailLines, 0, maxTailLines); len(msgs) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("tailLines"), *q.TailLines, msgs[0]))
		}
	}
	if _, err := syntax.Parse(q.Pattern, syntax.Perl); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("pattern"), q.Pattern, err.Error()))
	}
	return errs
}

func safeServiceName(s string) error {
	if len(s) > maxServiceLength {
		return fmt.Errorf("length must be less than %d", maxServiceLength)
	}
	if unsafeServiceChars.MatchString(s) {
		return fmt.Errorf("input contains unsupported characters")
	}
	return nil
}

// JournalArgs are journalctl's arguments for the query's options and the
// given services (those journald knows), as upstream passes them.
func (q *Query) JournalArgs(services []string) []string {
	args := []string{"--utc", "--no-pager", "--output=short-precise"}
	if q.SinceTime != nil {
		args = append(args, "--since="+q.SinceTime.Format(journalDateLayout))
	}
	if q.UntilTime != nil {
		args = append(args, "--until="+q.UntilTime.Format(journalDateLayout))
	}
	if q.TailLines != nil {
		args = append(args, "--pager-end", fmt.Sprintf("--lines=%d", *q.TailLines))
	}
	for _, s := range services {
		if s != "" {
			args = append(args, "--unit="+s)
		}
	}
	if q.Pattern != "" {
		args = append(args, "--grep="+q.Pattern)
	}
	if q.Boot != nil {
		args = append(args, "--boot", strconv.Itoa(*q.Boot))
	}
	return args
}

// journalKnows reports whether journalctl's list of units (the output of
// `journalctl --field _SYSTEMD_UNIT`) has SERVICE.service: journalctl
// answers a unit it never saw with no entries and no error.
func journalKnows(units, service string) bool {
	return strings.Contains(units, service+".service")
}

// logFileCandidates are the files a service without journal entries may
// log to under the log directory, tried in this order.
func logFileCandidates(service string) []string {
	return []string{service, service + ".log", service + "/" + service + ".log"}
}
