// A kernel with no VGPR free across one instruction: v2..v127 hold values
// across a global load whose address is v1 and whose result is v0, so
// every VGPR of its 128 (4 waves per SIMD on gfx90a; one VGPR more would
// cost a wave) is busy there. No register can hold the State Value Array
// for the whole kernel, none can slide across the load, and growing would
// cost occupancy: stage sva keeps it in the wave's slot in memory.
// Generated; the register lists are spelled out because inline assembly
// clobbers cannot be macros.
#include <hip/hip_runtime.h>

#define FILL_VGPRS "v_mov_b32 v2, 14\nv_mov_b32 v3, 21\nv_mov_b32 v4, 28\nv_mov_b32 v5, 35\nv_mov_b32 v6, 42\nv_mov_b32 v7, 49\nv_mov_b32 v8, 56\nv_mov_b32 v9, 63\nv_mov_b32 v10, 70\nv_mov_b32 v11, 77\nv_mov_b32 v12, 84\nv_mov_b32 v13, 91\nv_mov_b32 v14, 98\nv_mov_b32 v15, 105\nv_mov_b32 v16, 112\nv_mov_b32 v17, 119\nv_mov_b32 v18, 126\nv_mov_b32 v19, 133\nv_mov_b32 v20, 140\nv_mov_b32 v21, 147\nv_mov_b32 v22, 154\nv_mov_b32 v23, 161\nv_mov_b32 v24, 168\nv_mov_b32 v25, 175\nv_mov_b32 v26, 182\nv_mov_b32 v27, 189\nv_mov_b32 v28, 196\nv_mov_b32 v29, 203\nv_mov_b32 v30, 210\nv_mov_b32 v31, 217\nv_mov_b32 v32, 224\nv_mov_b32 v33, 231\nv_mov_b32 v34, 238\nv_mov_b32 v35, 245\nv_mov_b32 v36, 252\nv_mov_b32 v37, 259\nv_mov_b32 v38, 266\nv_mov_b32 v39, 273\nv_mov_b32 v40, 280\nv_mov_b32 v41, 287\nv_mov_b32 v42, 294\nv_mov_b32 v43, 301\nv_mov_b32 v44, 308\nv_mov_b32 v45, 315\nv_mov_b32 v46, 322\nv_mov_b32 v47, 329\nv_mov_b32 v48, 336\nv_mov_b32 v49, 343\nv_mov_b32 v50, 350\nv_mov_b32 v51, 357\nv_mov_b32 v52, 364\nv_mov_b32 v53, 371\nv_mov_b32 v54, 378\nv_mov_b32 v55, 385\nv_mov_b32 v56, 392\nv_mov_b32 v57, 399\nv_mov_b32 v58, 406\nv_mov_b32 v59, 413\nv_mov_b32 v60, 420\nv_mov_b32 v61, 427\nv_mov_b32 v62, 434\nv_mov_b32 v63, 441\nv_mov_b32 v64, 448\nv_mov_b32 v65, 455\nv_mov_b32 v66, 462\nv_mov_b32 v67, 469\nv_mov_b32 v68, 476\nv_mov_b32 v69, 483\nv_mov_b32 v70, 490\nv_mov_b32 v71, 497\nv_mov_b32 v72, 504\nv_mov_b32 v73, 511\nv_mov_b32 v74, 518\nv_mov_b32 v75, 525\nv_mov_b32 v76, 532\nv_mov_b32 v77, 539\nv_mov_b32 v78, 546\nv_mov_b32 v79, 553\nv_mov_b32 v80, 560\nv_mov_b32 v81, 567\nv_mov_b32 v82, 574\nv_mov_b32 v83, 581\nv_mov_b32 v84, 588\nv_mov_b32 v85, 595\nv_mov_b32 v86, 602\nv_mov_b32 v87, 609\nv_mov_b32 v88, 616\nv_mov_b32 v89, 623\nv_mov_b32 v90, 630\nv_mov_b32 v91, 637\nv_mov_b32 v92, 644\nv_mov_b32 v93, 651\nv_mov_b32 v94, 658\nv_mov_b32 v95, 665\nv_mov_b32 v96, 672\nv_mov_b32 v97, 679\nv_mov_b32 v98, 686\nv_mov_b32 v99, 693\nv_mov_b32 v100, 700\nv_mov_b32 v101, 707\nv_mov_b32 v102, 714\nv_mov_b32 v103, 721\nv_mov_b32 v104, 728\nv_mov_b32 v105, 735\nv_mov_b32 v106, 742\nv_mov_b32 v107, 749\nv_mov_b32 v108, 756\nv_mov_b32 v109, 763\nv_mov_b32 v110, 770\nv_mov_b32 v111, 777\nv_mov_b32 v112, 784\nv_mov_b32 v113, 791\nv_mov_b32 v114, 798\nv_mov_b32 v115, 805\nv_mov_b32 v116, 812\nv_mov_b32 v117, 819\nv_mov_b32 v118, 826\nv_mov_b32 v119, 833\nv_mov_b32 v120, 840\nv_mov_b32 v121, 847\nv_mov_b32 v122, 854\nv_mov_b32 v123, 861\nv_mov_b32 v124, 868\nv_mov_b32 v125, 875\nv_mov_b32 v126, 882\nv_mov_b32 v127, 889"
#define SUM_VGPRS "v_add_u32 v0, v0, v2\nv_add_u32 v0, v0, v3\nv_add_u32 v0, v0, v4\nv_add_u32 v0, v0, v5\nv_add_u32 v0, v0, v6\nv_add_u32 v0, v0, v7\nv_add_u32 v0, v0, v8\nv_add_u32 v0, v0, v9\nv_add_u32 v0, v0, v10\nv_add_u32 v0, v0, v11\nv_add_u32 v0, v0, v12\nv_add_u32 v0, v0, v13\nv_add_u32 v0, v0, v14\nv_add_u32 v0, v0, v15\nv_add_u32 v0, v0, v16\nv_add_u32 v0, v0, v17\nv_add_u32 v0, v0, v18\nv_add_u32 v0, v0, v19\nv_add_u32 v0, v0, v20\nv_add_u32 v0, v0, v21\nv_add_u32 v0, v0, v22\nv_add_u32 v0, v0, v23\nv_add_u32 v0, v0, v24\nv_add_u32 v0, v0, v25\nv_add_u32 v0, v0, v26\nv_add_u32 v0, v0, v27\nv_add_u32 v0, v0, v28\nv_add_u32 v0, v0, v29\nv_add_u32 v0, v0, v30\nv_add_u32 v0, v0, v31\nv_add_u32 v0, v0, v32\nv_add_u32 v0, v0, v33\nv_add_u32 v0, v0, v34\nv_add_u32 v0, v0, v35\nv_add_u32 v0, v0, v36\nv_add_u32 v0, v0, v37\nv_add_u32 v0, v0, v38\nv_add_u32 v0, v0, v39\nv_add_u32 v0, v0, v40\nv_add_u32 v0, v0, v41\nv_add_u32 v0, v0, v42\nv_add_u32 v0, v0, v43\nv_add_u32 v0, v0, v44\nv_add_u32 v0, v0, v45\nv_add_u32 v0, v0, v46\nv_add_u32 v0, v0, v47\nv_add_u32 v0, v0, v48\nv_add_u32 v0, v0, v49\nv_add_u32 v0, v0, v50\nv_add_u32 v0, v0, v51\nv_add_u32 v0, v0, v52\nv_add_u32 v0, v0, v53\nv_add_u32 v0, v0, v54\nv_add_u32 v0, v0, v55\nv_add_u32 v0, v0, v56\nv_add_u32 v0, v0, v57\nv_add_u32 v0, v0, v58\nv_add_u32 v0, v0, v59\nv_add_u32 v0, v0, v60\nv_add_u32 v0, v0, v61\nv_add_u32 v0, v0, v62\nv_add_u32 v0, v0, v63\nv_add_u32 v0, v0, v64\nv_add_u32 v0, v0, v65\nv_add_u32 v0, v0, v66\nv_add_u32 v0, v0, v67\nv_add_u32 v0, v0, v68\nv_add_u32 v0, v0, v69\nv_add_u32 v0, v0, v70\nv_add_u32 v0, v0, v71\nv_add_u32 v0, v0, v72\nv_add_u32 v0, v0, v73\nv_add_u32 v0, v0, v74\nv_add_u32 v0, v0, v75\nv_add_u32 v0, v0, v76\nv_add_u32 v0, v0, v77\nv_add_u32 v0, v0, v78\nv_add_u32 v0, v0, v79\nv_add_u32 v0, v0, v80\nv_add_u32 v0, v0, v81\nv_add_u32 v0, v0, v82\nv_add_u32 v0, v0, v83\nv_add_u32 v0, v0, v84\nv_add_u32 v0, v0, v85\nv_add_u32 v0, v0, v86\nv_add_u32 v0, v0, v87\nv_add_u32 v0, v0, v88\nv_add_u32 v0, v0, v89\nv_add_u32 v0, v0, v90\nv_add_u32 v0, v0, v91\nv_add_u32 v0, v0, v92\nv_add_u32 v0, v0, v93\nv_add_u32 v0, v0, v94\nv_add_u32 v0, v0, v95\nv_add_u32 v0, v0, v96\nv_add_u32 v0, v0, v97\nv_add_u32 v0, v0, v98\nv_add_u32 v0, v0, v99\nv_add_u32 v0, v0, v100\nv_add_u32 v0, v0, v101\nv_add_u32 v0, v0, v102\nv_add_u32 v0, v0, v103\nv_add_u32 v0, v0, v104\nv_add_u32 v0, v0, v105\nv_add_u32 v0, v0, v106\nv_add_u32 v0, v0, v107\nv_add_u32 v0, v0, v108\nv_add_u32 v0, v0, v109\nv_add_u32 v0, v0, v110\nv_add_u32 v0, v0, v111\nv_add_u32 v0, v0, v112\nv_add_u32 v0, v0, v113\nv_add_u32 v0, v0, v114\nv_add_u32 v0, v0, v115\nv_add_u32 v0, v0, v116\nv_add_u32 v0, v0, v117\nv_add_u32 v0, v0, v118\nv_add_u32 v0, v0, v119\nv_add_u32 v0, v0, v120\nv_add_u32 v0, v0, v121\nv_add_u32 v0, v0, v122\nv_add_u32 v0, v0, v123\nv_add_u32 v0, v0, v124\nv_add_u32 v0, v0, v125\nv_add_u32 v0, v0, v126\nv_add_u32 v0, v0, v127"

// out[lane] = in[lane] + the sum of every value held across the load,
// plus 1 in every third work-item.
__global__ void __launch_bounds__(256) noVgprAcrossTheLoad(int* out, const int* in) {
    // The asm addresses its wave's 64 work-items from these.
    int first = __builtin_amdgcn_readfirstlane(blockIdx.x * blockDim.x + (threadIdx.x & ~63u));
    int* wave_out = out + first;
    const int* wave_in = in + first;
    asm volatile(
        "v_mbcnt_lo_u32_b32 v1, -1, 0\n"
        "v_mbcnt_hi_u32_b32 v1, -1, v1\n"
        "v_lshlrev_b32 v1, 2, v1\n"
        FILL_VGPRS "\n"
        "global_load_dword v0, v1, %1\n"
        "s_waitcnt vmcnt(0)\n"
        SUM_VGPRS "\n"
        "global_store_dword v1, v0, %0\n"
        "s_waitcnt vmcnt(0)"
        :
        : "s"(wave_out), "s"(wave_in)
        : "memory", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31", "v32", "v33", "v34", "v35", "v36", "v37", "v38", "v39", "v40", "v41", "v42", "v43", "v44", "v45", "v46", "v47", "v48", "v49", "v50", "v51", "v52", "v53", "v54", "v55", "v56", "v57", "v58", "v59", "v60", "v61", "v62", "v63", "v64", "v65", "v66", "v67", "v68", "v69", "v70", "v71", "v72", "v73", "v74", "v75", "v76", "v77", "v78", "v79", "v80", "v81", "v82", "v83", "v84", "v85", "v86", "v87", "v88", "v89", "v90", "v91", "v92", "v93", "v94", "v95", "v96", "v97", "v98", "v99", "v100", "v101", "v102", "v103", "v104", "v105", "v106", "v107", "v108", "v109", "v110", "v111", "v112", "v113", "v114", "v115", "v116", "v117", "v118", "v119", "v120", "v121", "v122", "v123", "v124", "v125", "v126", "v127");
    // And a branch some work-items take (branch divergence has a point).
    // Every wave of the workgroup gets here before any goes on (in the
    // emulator, the waves of a workgroup take turns at barriers).
    __syncthreads();
    // The work-item from what stays in SGPRs (v0's id is overwritten).
    int item = first + __lane_id();
    if (item % 3 == 0) out[item] += 1;
}
