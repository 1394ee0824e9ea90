package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// DevicePlugin is the sample device plugin (test/fakes/deviceplugin) running for
// an agent: it registers with kubelet.sock in the agent's device plugins
// folder, its fake devices and log in DevDir.
type DevicePlugin struct {
	DevDir string
	cmd    *exec.Cmd
	done   chan struct{}
}

// UpstreamDevicePluginDir is where the upstream kubelet serves device
// plugins whatever its --root-dir (pluginapi.DevicePluginPath); nodelet's
// is <root-dir>/device-plugins, the same folder by default.
const UpstreamDevicePluginDir = "/var/lib/kubelet/device-plugins"

// DevicePluginDir is the device plugins folder of agent name whose root
// dir is rootDir.
func DevicePluginDir(name, rootDir string) string {
	if name == Upstream {
		return UpstreamDevicePluginDir
	}
	return filepath.Join(rootDir, "device-plugins")
}

// StartDevicePlugin starts the plugin binary bin for the agent serving
// pluginDir, its devices in devDir, with extra flags.
func StartDevicePlugin(bin, pluginDir, devDir string, extra ...string) (*DevicePlugin, error) {
	if err := os.MkdirAll(pluginDir, 0o750); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(devDir, "plugin.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	p := &DevicePlugin{DevDir: devDir, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"-plugin-dir", pluginDir, "-dev-dir", devDir}, extra...)...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

// Stop stops the plugin (it removes its socket) and waits for it.
func (p *DevicePlugin) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}

// SetHealthy makes the plugin report device id healthy or not.
func (p *DevicePlugin) SetHealthy(id string, healthy bool) error {
	path := filepath.Join(p.DevDir, id+".unhealthy")
	if healthy {
		return os.Remove(path)
	}
	return os.WriteFile(path, nil, 0o644)
}

// Log is what the plugin logged.
func (p *DevicePlugin) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.DevDir, "plugin.log"))
	return string(b)
}
