; Payloads between a load and its use: the counter touches no register the
; load writes, so it waits for nothing.
	s_load_dwordx2 s[2:3], s[0:1], 0x0
	v_lshlrev_b32_e32 v2, 2, v0
	s_waitcnt lgkmcnt(0)
	global_load_dword v3, v2, s[2:3]
	v_add_u32_e32 v4, 1, v0
	s_waitcnt vmcnt(0)
	v_add_u32_e32 v3, v3, v4
	global_store_dword v2, v3, s[2:3]
	s_endpgm
