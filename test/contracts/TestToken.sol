// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.37;

/// A minimal ERC-20 for tests and the sandbox: anyone may mint (it is a test token), decimals are
/// chosen at deployment (6 for a USDC-like stablecoin, 18 for others).
contract TestToken {
    string public name;
    string public symbol;
    uint8 public immutable decimals;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    constructor(string memory name_, string memory symbol_, uint8 decimals_) {
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
    }

    function mint(address to, uint256 value) external {
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    /// Burns from the caller (the CCTP test TokenMessengerV2 burns what it was given).
    function burn(uint256 value) external {
        require(balanceOf[msg.sender] >= value, "balance");
        balanceOf[msg.sender] -= value;
        totalSupply -= value;
        emit Transfer(msg.sender, address(0), value);
    }

    function transfer(address to, uint256 value) external virtual returns (bool) {
        _move(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(allowed >= value, "allowance");
        if (allowed != type(uint256).max) allowance[from][msg.sender] = allowed - value;
        _move(from, to, value);
        return true;
    }

    function _move(address from, address to, uint256 value) internal {
        require(balanceOf[from] >= value, "balance");
        balanceOf[from] -= value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}

/// A TestToken whose transfers can be switched to revert, for the failure paths.
contract RevertingToken is TestToken {
    bool public paused;

    constructor(string memory name_, string memory symbol_, uint8 decimals_) TestToken(name_, symbol_, decimals_) {}

    function setPaused(bool paused_) external {
        paused = paused_;
    }

    function transfer(address to, uint256 value) external override returns (bool) {
        require(!paused, "paused");
        _move(msg.sender, to, value);
        return true;
    }
}

/// Says it transferred, moves nothing, emits nothing: a token the executor must not believe.
contract SilentToken is TestToken {
    constructor(string memory name_, string memory symbol_, uint8 decimals_) TestToken(name_, symbol_, decimals_) {}

    function transfer(address, uint256) external pure override returns (bool) {
        return true;
    }
}
