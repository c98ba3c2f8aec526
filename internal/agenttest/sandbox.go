package agenttest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// sandboxEnv names the config file of a process started as the sandbox: the
// process in the agent's network namespace that relays the fake API and
// starts the agent.
const sandboxEnv = "UNDOLOG_AGENTTEST_SANDBOX"

// sandboxConfig is what the sandbox runs.
type sandboxConfig struct {
	Socket string   // the fake API's unix socket, outside the namespace
	Argv   []string // the agent's command line
	Dir    string   // its working directory
	Env    []string // its environment, but for ANTHROPIC_BASE_URL
}

// runSandbox is the sandbox: it brings the namespace's loopback up, refuses
// to go on unless loopback is all the namespace has, relays 127.0.0.1 to
// the fake API's unix socket (a path, which reaches out of a network
// namespace where no network address does), and runs the agent with its
// stdin empty and its stdout and stderr the sandbox's. It returns the
// agent's exit code.
func runSandbox(configPath string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "agenttest sandbox:", err)
		return 125
	}
	var cfg sandboxConfig
	if err := readJSON(configPath, &cfg); err != nil {
		return fail(err)
	}
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return fail(fmt.Errorf("ip link set lo up: %v: %s", err, strings.TrimSpace(string(out))))
	}
	if err := onlyLoopback(); err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	defer ln.Close()
	go relay(ln, cfg.Socket)

	cmd := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
	cmd.Dir = cfg.Dir
	cmd.Env = append(cfg.Env, "ANTHROPIC_BASE_URL=http://"+ln.Addr().String())
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The agent dies with the sandbox (a test's timeout kills the sandbox).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode()
	case err != nil:
		return fail(err)
	}
	return 0
}

// onlyLoopback says why the agent must not start here, if this network
// namespace has an interface besides the loopback one or the loopback one is
// down.
func onlyLoopback() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	var others []string
	loUp := false
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 && i.Name == "lo" {
			loUp = i.Flags&net.FlagUp != 0
			continue
		}
		others = append(others, i.Name)
	}
	if len(others) > 0 {
		return fmt.Errorf("refusing to start the agent: its network namespace has interfaces besides lo (%s); it runs only where nothing but loopback is reachable (unshare --net)", strings.Join(others, ", "))
	}
	if !loUp {
		return errors.New("refusing to start the agent: lo is not up in its network namespace")
	}
	return nil
}

// relay copies each connection of ln to and from a new connection to the
// unix socket.
func relay(ln net.Listener, socket string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("unix", socket)
			if err != nil {
				return
			}
			defer u.Close()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(u, c)
				u.(*net.UnixConn).CloseWrite()
			}()
			io.Copy(c, u)
			c.(*net.TCPConn).CloseWrite()
			wg.Wait()
		}()
	}
}
