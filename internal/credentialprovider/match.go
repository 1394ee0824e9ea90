package credentialprovider

import (
	"net"
	"net/url"
	"path/filepath"
	"strings"
)

// parseSchemelessURL parses a URL without a scheme (url.Parse needs one:
// "https://" is added, then cleared), as upstream's ParseSchemelessURL.
func parseSchemelessURL(schemelessURL string) (*url.URL, error) {
	parsed, err := url.Parse("https://" + schemelessURL)
	if err != nil {
		return nil, err
	}
	parsed.Scheme = ""
	return parsed, nil
}

// splitURL splits a URL's host into its dot-separated parts, and its port.
func splitURL(u *url.URL) (parts []string, port string) {
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		// could not parse port
		host, port = u.Host, ""
	}
	return strings.Split(host, "."), port
}

// urlsMatchStr tells whether target matches glob (upstream's URLsMatchStr):
// the same number of host parts, each matching its glob (filepath.Match,
// so a '*' never spans a dot), the same port, and glob's path a prefix of
// target's. Globs are not allowed in the port or the path.
func urlsMatchStr(glob, target string) (bool, error) {
	globURL, err := parseSchemelessURL(glob)
	if err != nil {
		return false, err
	}
	targetURL, err := parseSchemelessURL(target)
	if err != nil {
		return false, err
	}
	return urlsMatch(globURL, targetURL)
}

func urlsMatch(globURL, targetURL *url.URL) (bool, error) {
	globURLParts, globPort := splitURL(globURL)
	targetURLParts, targetPort := splitURL(targetURL)
	if globPort != targetPort {
		return false, nil
	}
	if len(globURLParts) != len(targetURLParts) {
		return false, nil
	}
	if !strings.HasPrefix(targetURL.Path, globURL.Path) {
		return false, nil
	}
	for k, globURLPart := range globURLParts {
		matched, err := filepath.Match(globURLPart, targetURLParts[k])
		if err != nil {
			return false, err
		}
		if !matched {
			return false, nil
		}
	}
	return true, nil
}

// parseRegistry is the registry host (and port) of an image: what is
// before its first '/'.
func parseRegistry(image string) string {
	return strings.Split(image, "/")[0]
}
