package sandbox

import (
	"fmt"
	"os/exec"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A seccomp filter keeps Direct's commands off the network, whatever the machine around them
// allows: on Lambda the runtime API listens on the execution environment's loopback, where no
// security group reaches, and a command that spoke to it could end its own invocation early
// and be handed the next one (another account's request). The filter refuses, with EACCES:
//   - socket() of any family but AF_UNIX, so no TCP, UDP, raw, netlink or vsock socket is made;
//   - io_uring, which makes sockets without the socket() system call;
//   - ptrace, process_vm_readv/writev and pidfd_getfd, which read other processes' memory and
//     descriptors (the handler is undumpable as well);
//   - x32 system calls, whose numbers the rules above do not name;
//
// and kills a process that makes system calls of another architecture (32-bit x86 reaches
// sockets through socketcall). no_new_privs comes with it: a set-user-ID program runs without
// its privileges, and the filter stays with every process the command starts.

// filterArch is the AUDIT_ARCH value of the system calls the filter lets through.
var filterArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]

// deniedCalls are refused outright.
var deniedCalls = []uint32{
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_PIDFD_GETFD,
}

const x32Bit = 0x40000000 // __X32_SYSCALL_BIT: an x32 system call on amd64

// seccomp_data's offsets: nr, arch, then args[0], whose low half comes first (little-endian,
// as amd64 and arm64 are).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
)

// filterProgram is the filter's classic BPF.
func filterProgram() []unix.SockFilter {
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	// Jumps go to one of the three returns at the end, whose indexes are known once the
	// program's length is: jumps are written with a placeholder and fixed up.
	const toAllow, toDeny, toKill = 0xf0, 0xf1, 0xf2
	p := []unix.SockFilter{
		{Code: ld, K: offArch},
		{Code: jeq, K: filterArch, Jt: 0, Jf: toKill},
		{Code: ld, K: offNr},
		{Code: jge, K: x32Bit, Jt: toDeny},
	}
	for _, nr := range deniedCalls {
		p = append(p, unix.SockFilter{Code: jeq, K: nr, Jt: toDeny})
	}
	p = append(p,
		unix.SockFilter{Code: jeq, K: unix.SYS_SOCKET, Jt: 0, Jf: toAllow},
		unix.SockFilter{Code: ld, K: offArg0},
		unix.SockFilter{Code: jeq, K: unix.AF_UNIX, Jt: toAllow, Jf: toDeny},
	)
	allow := len(p)
	p = append(p,
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_KILL_PROCESS},
	)
	target := map[uint8]int{toAllow: allow, toDeny: allow + 1, toKill: allow + 2}
	for i := range p[:allow] {
		for _, j := range []*uint8{&p[i].Jt, &p[i].Jf} {
			if to, ok := target[*j]; ok {
				*j = uint8(to - i - 1)
			}
		}
	}
	return p
}

// startFiltered starts cmd under the filter. Filters belong to a thread and pass to the
// processes it forks, so cmd is started from a thread that takes the filter on first; the
// thread stays locked to its goroutine, and ends with it, so nothing else of this process ever
// runs under the filter (the Go runtime makes no thread by cloning a locked one).
func startFiltered(cmd *exec.Cmd) error {
	if filterArch == 0 {
		return fmt.Errorf("no seccomp filter is written for %s", runtime.GOARCH)
	}
	prog := filterProgram()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- fmt.Errorf("no_new_privs: %w", err)
			return
		}
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
			errc <- fmt.Errorf("seccomp filter: %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}
