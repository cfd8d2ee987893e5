; Vector and scalar instructions: the counter's two hooks, alike points
; sharing one payload each.
	s_load_dwordx2 s[2:3], s[0:1], 0x0
	v_lshlrev_b32_e32 v1, 2, v0
	v_add_u32_e32 v2, 5, v0
	s_waitcnt lgkmcnt(0)
	global_store_dword v1, v2, s[2:3]
	s_endpgm
