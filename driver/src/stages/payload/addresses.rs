//! The IR that computes a memory address argument per lane at a point:
//! a flat or global instruction's (a 64-bit base plus a 32-bit index plus
//! the offset), an LDS instruction's (32 bits) and a buffer instruction's
//! (from its resource, with whether the lane's access is in the buffer's
//! range, which decides whether the hook runs on the lane).

use gpuinstr_intrinsics::Register;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::values::IntValue;
use inkwell::IntPredicate;

use super::{point_constant, read_reg_function, BufferAddress, PointConstantArgument};

/// Builds address values into the payload being written.
pub(super) struct AddressBuilder<'a, 'ctx> {
    pub context: &'ctx Context,
    pub module: &'a Module<'ctx>,
    pub builder: &'a Builder<'ctx>,
}

/// The point constant an offset reads, when points sharing the payload
/// have different ones.
pub(super) type OpaqueOffset = Option<(usize, PointConstantArgument)>;

const POSITIONED: &str = "builder is positioned";

impl<'ctx> AddressBuilder<'_, 'ctx> {
    fn read(&self, register: Register, bits: u32) -> IntValue<'ctx> {
        let function = read_reg_function(self.context, self.module, bits);
        let code = self.context.i32_type().const_int(u64::from(register.encode()), false);
        let call = self.builder.build_call(function, &[code.into()], "").expect(POSITIONED);
        call.try_as_basic_value().basic().expect("readReg returns a value").into_int_value()
    }

    fn i64(&self, value: u64) -> IntValue<'ctx> {
        self.context.i64_type().const_int(value, false)
    }

    fn i32(&self, value: u64) -> IntValue<'ctx> {
        self.context.i32_type().const_int(value, false)
    }

    fn widen(&self, value: IntValue<'ctx>) -> IntValue<'ctx> {
        self.builder.build_int_z_extend(value, self.context.i64_type(), "").expect(POSITIONED)
    }

    fn add(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> IntValue<'ctx> {
        self.builder.build_int_add(a, b, "").expect(POSITIONED)
    }

    fn mul(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> IntValue<'ctx> {
        self.builder.build_int_mul(a, b, "").expect(POSITIONED)
    }

    /// `(value >> shift) & mask`, in the value's width.
    fn field(&self, value: IntValue<'ctx>, shift: u64, mask: u64) -> IntValue<'ctx> {
        let ty = value.get_type();
        let shifted = self.builder.build_right_shift(value, ty.const_int(shift, false), false, "").expect(POSITIONED);
        self.builder.build_and(shifted, ty.const_int(mask, false), "").expect(POSITIONED)
    }

    /// The instruction's offset as a 64-bit value: a constant, or the point
    /// constant of the points sharing the payload (offsets are 16-bit at
    /// most: a 32-bit one, extended).
    fn offset(&self, offset: i64, opaque: OpaqueOffset) -> IntValue<'ctx> {
        match opaque {
            Some((slot, range)) if i32::try_from(range.min).is_ok() && i32::try_from(range.max).is_ok() => {
                let value = point_constant(self.context, self.module, self.builder, slot, range, 32);
                if range.min >= 0 {
                    self.widen(value)
                } else {
                    self.builder.build_int_s_extend(value, self.context.i64_type(), "").expect(POSITIONED)
                }
            }
            Some((slot, range)) => point_constant(self.context, self.module, self.builder, slot, range, 64),
            None => self.context.i64_type().const_int(offset as u64, true),
        }
    }

    /// A flat or global instruction's: the 64-bit `base`, plus the
    /// zero-extended 32-bit `index`, plus the offset.
    pub fn flat(&self, base: Register, index: Option<Register>, offset: i64, opaque: OpaqueOffset) -> IntValue<'ctx> {
        let mut address = self.read(base, 64);
        if let Some(index) = index {
            address = self.add(address, self.widen(self.read(index, 32)));
        }
        self.add(address, self.offset(offset, opaque))
    }

    /// An LDS instruction's: the 32-bit `address` plus the offset, in 32
    /// bits, zero-extended.
    pub fn lds(&self, address: Register, offset: i64, opaque: OpaqueOffset) -> IntValue<'ctx> {
        let offset = self.builder.build_int_truncate(self.offset(offset, opaque), self.context.i32_type(), "");
        let sum = self.add(self.read(address, 32), offset.expect(POSITIONED));
        self.widen(sum)
    }

    /// The lane's id in its wave (what `add_tid` adds to the index).
    fn lane_id(&self) -> IntValue<'ctx> {
        let i32_type = self.context.i32_type();
        let declare = |name: &str| {
            self.module.get_function(name).unwrap_or_else(|| {
                self.module.add_function(name, i32_type.fn_type(&[i32_type.into(), i32_type.into()], false), None)
            })
        };
        let all = self.i32(u64::from(u32::MAX));
        let low = self.builder.build_call(declare("llvm.amdgcn.mbcnt.lo"), &[all.into(), self.i32(0).into()], "");
        let low = low.expect(POSITIONED).try_as_basic_value().basic().expect("a value").into_int_value();
        let id = self.builder.build_call(declare("llvm.amdgcn.mbcnt.hi"), &[all.into(), low.into()], "");
        id.expect(POSITIONED).try_as_basic_value().basic().expect("a value").into_int_value()
    }

    /// A buffer instruction's address and whether the hook runs on the lane
    /// (an `i1`): its access is in the buffer's range and not through the
    /// private segment buffer, as [`BufferAddress`] says.
    pub fn buffer(&self, buffer: &BufferAddress, opaque: OpaqueOffset) -> (IntValue<'ctx>, IntValue<'ctx>) {
        let words = buffer.resource.map(|register| self.widen(self.read(register, 32)));
        let base = self.add(
            words[0],
            self.builder.build_left_shift(self.field(words[1], 0, 0xffff), self.i64(32), "").expect(POSITIONED),
        );
        let stride = self.field(words[1], 16, 0x3fff);
        let swizzle = self.field(words[1], 31, 1);
        let records = words[2];
        let element_size =
            self.builder.build_left_shift(self.i64(2), self.field(words[3], 19, 3), "").expect(POSITIONED);
        let index_stride =
            self.builder.build_left_shift(self.i64(8), self.field(words[3], 21, 3), "").expect(POSITIONED);
        let add_tid = self.field(words[3], 23, 1);
        let soffset = match buffer.soffset {
            Some(register) => self.widen(self.read(register, 32)),
            None => self.i64(buffer.soffset_constant as u64),
        };
        let mut offset = self.offset(buffer.offset, opaque);
        if let Some(voffset) = buffer.voffset {
            offset = self.add(offset, self.widen(self.read(voffset, 32)));
        }
        let mut index = match buffer.index {
            Some(index) => self.widen(self.read(index, 32)),
            None => self.i64(0),
        };
        let tid = self.mul(add_tid, self.widen(self.lane_id()));
        index = self.add(index, tid);
        // Unswizzled: index * stride + offset.
        let linear = self.add(self.mul(index, stride), offset);
        // Swizzled: elements of `index_stride` consecutive indices interleave.
        let udiv = |a, b| self.builder.build_int_unsigned_div(a, b, "").expect(POSITIONED);
        let urem = |a, b| self.builder.build_int_unsigned_rem(a, b, "").expect(POSITIONED);
        let (index_msb, index_lsb) = (udiv(index, index_stride), urem(index, index_stride));
        let (offset_msb, offset_lsb) = (udiv(offset, element_size), urem(offset, element_size));
        let swizzled = self.add(
            self.add(
                self.mul(self.add(self.mul(index_msb, stride), self.mul(offset_msb, element_size)), index_stride),
                self.mul(index_lsb, element_size),
            ),
            offset_lsb,
        );
        let zero = self.i64(0);
        let is_swizzled = self.builder.build_int_compare(IntPredicate::NE, swizzle, zero, "").expect(POSITIONED);
        let in_buffer =
            self.builder.build_select(is_swizzled, swizzled, linear, "").expect(POSITIONED).into_int_value();
        let address = self.add(self.add(base, soffset), in_buffer);
        // The range check (none for swizzled resources).
        let end = self.add(offset, self.i64(u64::from(buffer.checked_bytes)));
        let raw_in_range = self.builder.build_int_compare(IntPredicate::ULE, end, records, "").expect(POSITIONED);
        let index_in_range = self.builder.build_int_compare(IntPredicate::ULT, index, records, "").expect(POSITIONED);
        let raw = self.builder.build_int_compare(IntPredicate::EQ, stride, zero, "").expect(POSITIONED);
        let checked = self.builder.build_select(raw, raw_in_range, index_in_range, "").expect(POSITIONED);
        let in_range = self.builder.build_or(is_swizzled, checked.into_int_value(), "").expect(POSITIONED);
        // A resource adding the lane to the index is the private segment
        // buffer's (scratch, which LLVM spills through on gfx9): its
        // addresses move with the scratch instrumentation adds, and like
        // SCRATCH instructions' they are not traced.
        let private = self.builder.build_int_compare(IntPredicate::NE, add_tid, zero, "").expect(POSITIONED);
        let traced = self.builder.build_and(in_range, self.builder.build_not(private, "").expect(POSITIONED), "");
        (address, traced.expect(POSITIONED))
    }
}
