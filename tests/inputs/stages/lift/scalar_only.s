; Scalar code alone: a kernel the counter sees only scalar instructions in.
	s_load_dword s2, s[0:1], 0x0
	s_waitcnt lgkmcnt(0)
	s_add_u32 s2, s2, 1
	s_lshl_b32 s3, s2, 2
	s_endpgm
