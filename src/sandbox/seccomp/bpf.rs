//! A small classic-BPF assembler for seccomp programs, and (for tests) an
//! interpreter of the instructions it emits.
//!
//! Only what the filter needs: load a 32-bit word of `struct
//! seccomp_data`, `and` with a constant, jump on equality, `>=` or bit test,
//! unconditional jump, return a constant. Jumps name labels; [`Asm::finish`]
//! resolves them and refuses a conditional jump farther than the 255
//! instructions classic BPF can encode.

/// `struct seccomp_data` offsets.
pub const NR: u32 = 0;
/// The audit architecture.
pub const ARCH: u32 = 4;

/// Offset of the low 32 bits of argument `i` (every checked argument is a
/// 32-bit type in the kernel, or read by it as its low 32 bits).
pub const fn arg_low(i: u8) -> u32 {
    let base = 16 + 8 * i as u32;
    if cfg!(target_endian = "little") {
        base
    } else {
        base + 4
    }
}

/// A jump target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum To {
    /// The next instruction.
    Next,
    /// A label.
    Label(usize),
    /// Skip this many instructions.
    Skip(u8),
}

#[derive(Debug, Clone, Copy)]
enum Ins {
    Load(u32),
    And(u32),
    Jeq(u32, To, To),
    Jge(u32, To, To),
    Jset(u32, To, To),
    Ja(To),
    Ret(u32),
    Label(usize),
}

/// Why a program could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum AsmError {
    /// A conditional jump is too far for classic BPF.
    #[error("jump of {0} instructions is too far for a conditional BPF jump")]
    TooFar(usize),
    /// A label was used but never placed.
    #[error("label {0} is never placed")]
    Unplaced(usize),
    /// The program is longer than the kernel accepts.
    #[error("{0} instructions: longer than the kernel's limit of 4096")]
    TooLong(usize),
}

/// A program under construction.
#[derive(Debug, Default)]
pub struct Asm {
    ins: Vec<Ins>,
    labels: usize,
}

impl Asm {
    /// A new label, to be placed with [`Asm::place`].
    pub fn label(&mut self) -> usize {
        self.labels += 1;
        self.labels - 1
    }

    /// Place `label` at the next instruction.
    pub fn place(&mut self, label: usize) {
        self.ins.push(Ins::Label(label));
    }

    /// `A = seccomp_data[offset]` (a 32-bit word).
    pub fn load(&mut self, offset: u32) {
        self.ins.push(Ins::Load(offset));
    }

    /// `A &= mask`.
    pub fn and(&mut self, mask: u32) {
        self.ins.push(Ins::And(mask));
    }

    /// `if A == k goto t else goto f`.
    pub fn jeq(&mut self, k: u32, t: To, f: To) {
        self.ins.push(Ins::Jeq(k, t, f));
    }

    /// `if A >= k goto t else goto f`.
    pub fn jge(&mut self, k: u32, t: To, f: To) {
        self.ins.push(Ins::Jge(k, t, f));
    }

    /// `if A & k goto t else goto f`.
    pub fn jset(&mut self, k: u32, t: To, f: To) {
        self.ins.push(Ins::Jset(k, t, f));
    }

    /// `goto to`.
    pub fn ja(&mut self, to: To) {
        self.ins.push(Ins::Ja(to));
    }

    /// `return k`.
    pub fn ret(&mut self, k: u32) {
        self.ins.push(Ins::Ret(k));
    }

    /// Resolve the labels: the program, ready for the kernel.
    pub fn finish(self) -> Result<Vec<libc::sock_filter>, AsmError> {
        let mut at = vec![None; self.labels];
        let mut n = 0usize;
        for i in &self.ins {
            match i {
                Ins::Label(l) => at[*l] = Some(n),
                _ => n += 1,
            }
        }
        if n > 4096 {
            return Err(AsmError::TooLong(n));
        }
        let mut out = Vec::with_capacity(n);
        let mut pc = 0usize;
        let off = |to: To, pc: usize| -> Result<usize, AsmError> {
            match to {
                To::Next => Ok(0),
                To::Skip(n) => Ok(n as usize),
                To::Label(l) => {
                    let t = at[l].ok_or(AsmError::Unplaced(l))?;
                    // Jumps only go forward (the program is a DAG).
                    Ok(t.saturating_sub(pc + 1))
                }
            }
        };
        let cond = |t: To, f: To, pc: usize| -> Result<(u8, u8), AsmError> {
            let (t, f) = (off(t, pc)?, off(f, pc)?);
            let t8 = u8::try_from(t).map_err(|_| AsmError::TooFar(t))?;
            let f8 = u8::try_from(f).map_err(|_| AsmError::TooFar(f))?;
            Ok((t8, f8))
        };
        let op = |code: u32| code as u16;
        for i in &self.ins {
            let f = match *i {
                Ins::Label(_) => continue,
                Ins::Load(k) => ins(op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS), 0, 0, k),
                Ins::And(k) => ins(op(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K), 0, 0, k),
                Ins::Jeq(k, t, f) => {
                    let (t, f) = cond(t, f, pc)?;
                    ins(op(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K), t, f, k)
                }
                Ins::Jge(k, t, f) => {
                    let (t, f) = cond(t, f, pc)?;
                    ins(op(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K), t, f, k)
                }
                Ins::Jset(k, t, f) => {
                    let (t, f) = cond(t, f, pc)?;
                    ins(op(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K), t, f, k)
                }
                Ins::Ja(to) => {
                    let o = off(to, pc)?;
                    ins(
                        op(libc::BPF_JMP | libc::BPF_JA),
                        0,
                        0,
                        u32::try_from(o).map_err(|_| AsmError::TooFar(o))?,
                    )
                }
                Ins::Ret(k) => ins(op(libc::BPF_RET | libc::BPF_K), 0, 0, k),
            };
            out.push(f);
            pc += 1;
        }
        Ok(out)
    }
}

fn ins(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Run `prog` on a `struct seccomp_data` (nr, arch, ip, six arguments), as
/// the kernel would: the returned action word. For tests only; panics on
/// instructions [`Asm`] does not emit.
#[cfg(test)]
pub fn run(prog: &[libc::sock_filter], nr: i32, arch: u32, args: [u64; 6]) -> u32 {
    let mut data = Vec::with_capacity(64);
    data.extend_from_slice(&nr.to_ne_bytes());
    data.extend_from_slice(&arch.to_ne_bytes());
    data.extend_from_slice(&0u64.to_ne_bytes());
    for a in args {
        data.extend_from_slice(&a.to_ne_bytes());
    }
    let word = |off: u32| -> u32 {
        let o = off as usize;
        u32::from_ne_bytes(data[o..o + 4].try_into().unwrap())
    };
    let mut a = 0u32;
    let mut pc = 0usize;
    loop {
        let i = prog[pc];
        let code = i.code as u32;
        pc += 1;
        match code {
            c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => a = word(i.k),
            c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => a &= i.k,
            c if c == libc::BPF_JMP | libc::BPF_JA => pc += i.k as usize,
            c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                pc += if a == i.k { i.jt } else { i.jf } as usize
            }
            c if c == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K => {
                pc += if a >= i.k { i.jt } else { i.jf } as usize
            }
            c if c == libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K => {
                pc += if a & i.k != 0 { i.jt } else { i.jf } as usize
            }
            c if c == libc::BPF_RET | libc::BPF_K => return i.k,
            other => panic!("unexpected BPF instruction {other:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_resolve_forward_and_far_conditional_jumps_are_refused() {
        let mut a = Asm::default();
        let yes = a.label();
        a.load(NR);
        a.jeq(7, To::Label(yes), To::Next);
        a.ret(1);
        a.place(yes);
        a.ret(2);
        let p = a.finish().unwrap();
        assert_eq!(run(&p, 7, 0, [0; 6]), 2);
        assert_eq!(run(&p, 8, 0, [0; 6]), 1);

        let mut a = Asm::default();
        let far = a.label();
        a.load(NR);
        a.jeq(1, To::Label(far), To::Next);
        for _ in 0..300 {
            a.ret(0);
        }
        a.place(far);
        a.ret(1);
        assert!(matches!(a.finish(), Err(AsmError::TooFar(300))));
    }

    #[test]
    fn arguments_are_read_by_their_low_word() {
        let mut a = Asm::default();
        let no = a.label();
        a.load(arg_low(2));
        a.jset(0x10, To::Next, To::Label(no));
        a.ret(1);
        a.place(no);
        a.ret(0);
        let p = a.finish().unwrap();
        assert_eq!(run(&p, 0, 0, [0, 0, 0x1_0000_0010, 0, 0, 0]), 1);
        assert_eq!(run(&p, 0, 0, [0, 0, 0x1_0000_0000, 0, 0, 0]), 0);
    }
}
