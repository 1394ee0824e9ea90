// Command credprovider is a kubelet image credential provider plugin for
// the tests: it reads a CredentialProviderRequest
// (credentialprovider.kubelet.k8s.io/v1) on stdin and answers a
// CredentialProviderResponse on stdout giving --username and the contents
// of --password-file (trimmed) for --registry (a key of the response's
// auth map: a registry, a path or a glob such as *.example.com), with
// --cache-key-type and --cache-duration (left out when empty: the kubelet
// then uses the provider's defaultCacheDuration). Each request, as
// received, is appended as one JSON line to --log. --mode makes it
// misbehave: hang (never answers), crash (exits 1, a message on stderr),
// garbage (answers something that is not JSON). --require-token fails a
// request without a serviceAccountToken.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
)

func main() {
	registry := flag.String("registry", "", "the auth map's key (registry, path or glob) (required)")
	username := flag.String("username", "", "the user name given")
	passwordFile := flag.String("password-file", "", "a file holding the password given (trimmed)")
	cacheKeyType := flag.String("cache-key-type", string(credentialproviderv1.RegistryPluginCacheKeyType), "the response's cacheKeyType: Image, Registry or Global")
	cacheDuration := flag.String("cache-duration", "", "the response's cacheDuration (a Go duration); empty: none")
	logFile := flag.String("log", "", "a file each request is appended to, one JSON line each")
	mode := flag.String("mode", "ok", "ok, hang, crash or garbage")
	requireToken := flag.Bool("require-token", false, "fail a request without a serviceAccountToken")
	flag.Parse()
	if err := run(*registry, *username, *passwordFile, *cacheKeyType, *cacheDuration, *logFile, *mode, *requireToken); err != nil {
		fmt.Fprintln(os.Stderr, "credprovider:", err)
		os.Exit(1)
	}
}

func run(registry, username, passwordFile, cacheKeyType, cacheDuration, logFile, mode string, requireToken bool) error {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		return fmt.Errorf("read the request: %w", err)
	}
	if logFile != "" {
		if err := logRequest(logFile, in); err != nil {
			return err
		}
	}
	switch mode {
	case "ok":
	case "hang":
		for {
			time.Sleep(time.Hour)
		}
	case "crash":
		return fmt.Errorf("crashing as asked (--mode=crash)")
	case "garbage":
		fmt.Println("this is not JSON {")
		return nil
	default:
		return fmt.Errorf("unknown --mode %q", mode)
	}

	var req credentialproviderv1.CredentialProviderRequest
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("decode the request: %w", err)
	}
	if want := credentialproviderv1.SchemeGroupVersion.String(); req.APIVersion != want || req.Kind != "CredentialProviderRequest" {
		return fmt.Errorf("request is %s %s, want %s CredentialProviderRequest", req.APIVersion, req.Kind, want)
	}
	if req.Image == "" {
		return fmt.Errorf("request has no image")
	}
	if requireToken && req.ServiceAccountToken == "" {
		return fmt.Errorf("request for %s has no serviceAccountToken (--require-token)", req.Image)
	}
	if registry == "" {
		return fmt.Errorf("--registry is required")
	}
	var password string
	if passwordFile != "" {
		data, err := os.ReadFile(passwordFile)
		if err != nil {
			return fmt.Errorf("read the password: %w", err)
		}
		password = strings.TrimSpace(string(data))
	}

	resp := credentialproviderv1.CredentialProviderResponse{
		TypeMeta:     metav1.TypeMeta{APIVersion: credentialproviderv1.SchemeGroupVersion.String(), Kind: "CredentialProviderResponse"},
		CacheKeyType: credentialproviderv1.PluginCacheKeyType(cacheKeyType),
		Auth:         map[string]credentialproviderv1.AuthConfig{registry: {Username: username, Password: password}},
	}
	if cacheDuration != "" {
		d, err := time.ParseDuration(cacheDuration)
		if err != nil {
			return fmt.Errorf("--cache-duration: %w", err)
		}
		resp.CacheDuration = &metav1.Duration{Duration: d}
	}
	return json.NewEncoder(os.Stdout).Encode(resp)
}

// logRequest appends the request, compacted to one line, to path.
func logRequest(path string, req []byte) error {
	var line bytes.Buffer
	if err := json.Compact(&line, req); err != nil {
		// Not JSON: logged as a JSON string.
		line.Reset()
		quoted, _ := json.Marshal(string(req))
		line.Write(quoted)
	}
	line.WriteByte('\n')
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open the log: %w", err)
	}
	if _, err := f.Write(line.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("write the log: %w", err)
	}
	return f.Close()
}
