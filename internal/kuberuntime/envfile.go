package kuberuntime

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	v1 "k8s.io/api/core/v1"
)

// fileKeyValue is an env[].valueFrom.fileKeyRef's value (EnvFiles): KEY
// read from the file at ref.path inside the pod's volume ref.volumeName
// (an emptyDir, typically written by an init container), joined so that
// a symlink in the volume cannot lead out of it. As upstream's
// makeEnvironmentVariables: a volume not prepared, a file that cannot be
// read or parsed is an error even when optional; a key that is missing or
// empty is skipped when optional (ok false), an error otherwise.
func fileKeyValue(ref *v1.FileKeySelector, volumePaths map[string]string) (value string, ok bool, err error) {
	root, found := volumePaths[ref.VolumeName]
	if !found {
		return "", false, fmt.Errorf("cannot find the volume %q referenced by FileKeyRef", ref.VolumeName)
	}
	path, err := securejoin.SecureJoin(root, ref.Path)
	if err != nil {
		return "", false, err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", false, fmt.Errorf("couldn't parse env file: failed to open environment variable file %q: %w", path, err)
	}
	defer f.Close()
	v, err := parseEnvFile(f, ref.Key)
	if err != nil {
		return "", false, fmt.Errorf("couldn't parse env file %q: %w", path, err)
	}
	if v == "" {
		if ref.Optional != nil && *ref.Optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("environment variable key %q not found in file %q", ref.Key, path)
	}
	return v, true, nil
}

// parseEnvFile is key's value in an environment file, "" when absent, in
// the strict subset of POSIX shell syntax upstream's EnvFiles accepts:
// KEY='value' (single quotes required, content literal, may span lines,
// a '#' comment may follow the closing quote); leading blanks, blank lines
// and '#' lines ignored; blanks before '=' refused; blanks after '='
// assign the empty string (as a shell does); the first definition wins.
func parseEnvFile(r io.Reader, key string) (string, error) {
	scanner := bufio.NewScanner(r)
	lineNum := 0
	for scanner.Scan() {
		lineNum++
		line := strings.TrimLeft(scanner.Text(), " \t")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		eq := strings.Index(line, "=")
		if eq == -1 {
			return "", fmt.Errorf("invalid environment variable format at line %d: missing '='", lineNum)
		}
		namePart := line[:eq]
		name := strings.TrimRight(namePart, " \t")
		if name == "" {
			return "", fmt.Errorf("invalid environment variable format at line %d: empty variable name", lineNum)
		}
		if name != namePart {
			return "", fmt.Errorf("invalid environment variable format at line %d: whitespace before '=' is not allowed", lineNum)
		}
		valuePart := line[eq+1:]
		trimmed := strings.TrimLeft(valuePart, " \t")
		if trimmed != valuePart {
			if name == key {
				return "", nil
			}
			continue
		}
		if !strings.HasPrefix(trimmed, "'") {
			return "", fmt.Errorf("invalid environment variable format at line %d: value must be enclosed in single quotes", lineNum)
		}
		var value strings.Builder
		rest := trimmed[1:]
		start := lineNum
		for {
			closing := strings.Index(rest, "'")
			if closing != -1 {
				value.WriteString(rest[:closing])
				after := strings.TrimLeft(rest[closing+1:], " \t")
				if after != "" && !strings.HasPrefix(after, "#") {
					return "", fmt.Errorf("invalid environment variable format at line %d: unexpected content after closing quote", lineNum)
				}
				if name == key {
					return value.String(), nil
				}
				break
			}
			value.WriteString(rest)
			value.WriteString("\n")
			if !scanner.Scan() {
				return "", fmt.Errorf("invalid environment variable format starting at line %d: unclosed single quote", start)
			}
			lineNum++
			rest = scanner.Text()
		}
	}
	if err := scanner.Err(); err != nil {
		return "", fmt.Errorf("error reading environment variable file: %w", err)
	}
	return "", nil
}
