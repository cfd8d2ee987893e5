; EXEC narrowed and restored: live registers in both regions.
	v_cmp_gt_u32_e32 vcc, 32, v0
	v_mov_b32_e32 v1, 7
	s_and_saveexec_b64 s[4:5], vcc
	v_add_u32_e32 v1, v1, v0
	s_or_b64 exec, exec, s[4:5]
	v_add_u32_e32 v2, v1, v1
	s_endpgm
