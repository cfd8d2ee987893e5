; A counted loop and a branch around a store: blocks, edges, a backward branch.
	s_load_dwordx2 s[2:3], s[0:1], 0x0
	v_mov_b32_e32 v1, 0
	s_mov_b32 s4, 8
.Lloop:
	v_add_u32_e32 v1, 3, v1
	s_sub_u32 s4, s4, 1
	s_cmp_lg_u32 s4, 0
	s_cbranch_scc1 .Lloop
	v_cmp_gt_u32_e32 vcc, 64, v0
	s_and_saveexec_b64 s[6:7], vcc
	s_cbranch_execz .Ldone
	s_waitcnt lgkmcnt(0)
	global_store_dword v0, v1, s[2:3]
.Ldone:
	s_or_b64 exec, exec, s[6:7]
	s_endpgm
