// Command probe tries, from inside a sandbox run, what the seccomp filter refuses, and prints
// one line per try: "<name> refused", "<name> allowed", or "<name> error: …".
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	addr := os.Args[1] // a listener of the machine's loopback, the Lambda runtime API's stand-in
	try("tcp-loopback", func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	for _, s := range []struct {
		name         string
		family, kind int
	}{
		{"socket-inet-udp", unix.AF_INET, unix.SOCK_DGRAM},
		{"socket-inet6", unix.AF_INET6, unix.SOCK_STREAM},
		{"socket-packet", unix.AF_PACKET, unix.SOCK_RAW},
		{"socket-netlink", unix.AF_NETLINK, unix.SOCK_RAW},
		{"socket-vsock", unix.AF_VSOCK, unix.SOCK_STREAM},
		{"socket-unix", unix.AF_UNIX, unix.SOCK_STREAM},
	} {
		try(s.name, func() error {
			fd, err := unix.Socket(s.family, s.kind, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		})
	}
	try("io_uring_setup", func() error {
		var params [120]byte
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		if errno != 0 {
			return errno
		}
		unix.Close(int(fd))
		return nil
	})
	try("ptrace-parent", func() error { return unix.PtraceAttach(os.Getppid()) })
}

func try(name string, f func() error) {
	switch err := f(); {
	case err == nil:
		fmt.Println(name, "allowed")
	case errors.Is(err, unix.EACCES):
		fmt.Println(name, "refused")
	default:
		fmt.Println(name, "error:", err)
	}
}
