//! CPU pinning: the single-connection runs put client and daemon on one
//! CPU, because on this kind of VM a cross-CPU wake-up costs tens of µs.

use anyhow::{Context, Result};

/// Where a run's client and daemon threads may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pin {
    /// Client and daemon both on CPU 0.
    Cpu0,
    /// Anywhere.
    Free,
}

impl Pin {
    pub fn name(self) -> &'static str {
        match self {
            Pin::Cpu0 => "pinned",
            Pin::Free => "unpinned",
        }
    }

    fn set(self) -> libc::cpu_set_t {
        // SAFETY: cpu_set_t is plain data; the CPU_* helpers index within it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            match self {
                Pin::Cpu0 => libc::CPU_SET(0, &mut set),
                Pin::Free => {
                    for cpu in 0..cpus() {
                        libc::CPU_SET(cpu, &mut set);
                    }
                }
            }
            set
        }
    }

    /// Applies to the calling thread.
    pub fn apply_here(self) -> Result<()> {
        set_affinity(0, self)
    }

    /// Applies to every thread of process `pid`.
    pub fn apply_to_process(self, pid: u32) -> Result<()> {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .with_context(|| format!("list threads of {pid}"))?;
        for task in tasks {
            let tid: i32 = task?.file_name().to_string_lossy().parse()?;
            set_affinity(tid, self)?;
        }
        Ok(())
    }
}

/// Runs `f` with this thread and every thread of daemon `pid` on CPU 0,
/// then frees both, whether or not `f` succeeded (its error first).
pub fn on_cpu0<T>(pid: u32, f: impl FnOnce() -> Result<T>) -> Result<T> {
    Pin::Cpu0.apply_to_process(pid)?;
    Pin::Cpu0.apply_here()?;
    let out = f();
    let freed = Pin::Free
        .apply_here()
        .and_then(|()| Pin::Free.apply_to_process(pid));
    let out = out?;
    freed?;
    Ok(out)
}

fn set_affinity(tid: i32, pin: Pin) -> Result<()> {
    let set = pin.set();
    // SAFETY: a valid cpu_set_t of the size we pass.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("pin thread {tid}"));
    }
    Ok(())
}

/// Online CPUs (not this thread's affinity mask, which pinning narrows).
pub fn cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}
