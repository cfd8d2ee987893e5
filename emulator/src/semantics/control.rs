//! SOPP and program-counter instructions: branches, the end of the
//! program, barriers, waits (memory completes at once here, so waits do
//! nothing; `s_sleep` lets the host's threads run), calls and returns.

use super::{Context, Handler};
use crate::error::Fault;
use crate::program::Inst;
use crate::wave::WaveState;

fn nothing(_: &mut Context<'_>, _: &Inst) -> Result<(), Fault> {
    Ok(())
}

fn branch_if(c: &mut Context<'_>, i: &Inst, taken: bool) -> Result<(), Fault> {
    if taken {
        c.jump(i.target.expect("branches have targets"));
    }
    Ok(())
}

/// `s_sleep N`: about 64×N clocks on the hardware, where a wave waiting
/// for something sleeps in a loop. Here the waited-for thing may be the
/// host's (a ring of records it empties): the emulating thread sleeps N
/// microseconds (at least one), so the host's threads run.
fn sleep(_: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    let clocks_by_64 = (i.imm(0) & 0x7f).max(1) as u64;
    std::thread::sleep(std::time::Duration::from_micros(clocks_by_64));
    Ok(())
}

/// `s_sendmsg`: of the messages a compute kernel sends, the interrupt
/// (hostcall's doorbell to the host: the signal's event id in M0).
fn send_message(c: &mut Context<'_>, i: &Inst) -> Result<(), Fault> {
    const MSG_INTERRUPT: i64 = 1;
    let message = i.imm(0) & 0xf;
    match (message, c.machine.interrupts) {
        (MSG_INTERRUPT, Some(interrupts)) => {
            (interrupts.0)(c.wave.sgpr[crate::operands::M0 as usize] & 0xff_ffff);
            Ok(())
        }
        (MSG_INTERRUPT, None) => Err(Fault::UnimplementedCase("an interrupt, with no device to take it".into())),
        (other, _) => Err(Fault::UnimplementedCase(format!("message {other}"))),
    }
}

pub fn handler(name: &str) -> Option<Handler> {
    Some(match name {
        "S_NOP" | "S_WAITCNT" | "S_SETPRIO" | "S_ICACHE_INV" | "S_TTRACEDATA" | "S_SET_GPR_IDX_OFF" => nothing,
        "S_SLEEP" => sleep,
        "S_ENDPGM" => |c, _| {
            c.wave.state = WaveState::Ended;
            Ok(())
        },
        "S_BARRIER" => |c, _| {
            c.wave.state = WaveState::AtBarrier;
            Ok(())
        },
        "S_TRAP" => |_, i| Err(Fault::Trap(i.imm(0) as u32)),
        "S_SENDMSG" => send_message,
        "S_BRANCH" => |c, i| branch_if(c, i, true),
        "S_CBRANCH_SCC0" => |c, i| branch_if(c, i, !c.wave.scc),
        "S_CBRANCH_SCC1" => |c, i| branch_if(c, i, c.wave.scc),
        "S_CBRANCH_VCCZ" => |c, i| branch_if(c, i, c.wave.vcc() == 0),
        "S_CBRANCH_VCCNZ" => |c, i| branch_if(c, i, c.wave.vcc() != 0),
        "S_CBRANCH_EXECZ" => |c, i| branch_if(c, i, c.wave.exec() == 0),
        "S_CBRANCH_EXECNZ" => |c, i| branch_if(c, i, c.wave.exec() != 0),
        "S_GETPC_B64" => |c, i| {
            let next = c.next_pc;
            c.wave.write_scalar64(&i.defs[0], next);
            Ok(())
        },
        "S_SETPC_B64" => |c, i| {
            c.next_pc = c.wave.scalar64(&i.srcs[0].operand);
            Ok(())
        },
        "S_SWAPPC_B64" => |c, i| {
            let target = c.wave.scalar64(&i.srcs[0].operand);
            let back = c.next_pc;
            c.wave.write_scalar64(&i.defs[0], back);
            c.next_pc = target;
            Ok(())
        },
        _ => return None,
    })
}
