; A load whose register is written while later instructions run: the
; liveness stage's pending counters and the registers live across it.
	s_load_dwordx2 s[2:3], s[0:1], 0x0
	v_lshlrev_b32_e32 v2, 2, v0
	s_waitcnt lgkmcnt(0)
	global_load_dword v3, v2, s[2:3]
	v_add_u32_e32 v4, 1, v0
	v_mul_lo_u32 v5, v4, v4
	s_waitcnt vmcnt(0)
	v_add_u32_e32 v3, v3, v5
	global_store_dword v2, v3, s[2:3]
	s_endpgm
