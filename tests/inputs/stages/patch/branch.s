; A branch over instrumented code: the patch moves labels and branches.
	v_cmp_gt_u32_e32 vcc, 16, v0
	s_and_saveexec_b64 s[4:5], vcc
	s_cbranch_execz .Lskip
	v_add_u32_e32 v1, 1, v0
.Lskip:
	s_or_b64 exec, exec, s[4:5]
	s_endpgm
